"""Linear algebra beyond the op table (tests/op_db.py): matmul's broadcasting
rules and einsum's equations against NumPy, operand layouts BLAS reads in
place (transposed, sliced, broadcast batches, column-major out=), empty
dims, beta/alpha semantics (beta == 0 ignores NaN), integer and half
dtypes, sizes that reach the blocked / multi-threaded paths, and the GIL
being released. References are NumPy; torch, when installed, is an extra
check of dtype rules that NumPy does not have."""
import threading
import warnings

import numpy as np
import pytest

import ember

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

RNG = np.random.default_rng(1234)


def T(x):
    return ember.from_numpy(np.array(x, order="C"))  # a copy: tests write into some tensors


def rand(*shape, dtype=np.float64):
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(-4, 5, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def close(got, want, tol=1e-10):
    got = got.numpy() if isinstance(got, ember.Tensor) else np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol * scale)


def layouts(x):
    """x as ember tensors with the same values in several memory layouts:
    contiguous, built transposed (column-major matrices), sliced with a step,
    batch dims permuted."""
    out = [("contig", T(x))]
    if x.ndim >= 2:
        out.append(("T", T(np.swapaxes(x, -1, -2)).transpose(-1, -2)))
    if x.ndim >= 1 and x.shape[-1]:
        big = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
        big[..., ::2] = x
        big[..., 1::2] = np.nan if x.dtype.kind == "f" else 99  # never read
        out.append(("slice", T(big)[..., ::2]))
    if x.ndim >= 3:
        out.append(("batch-T", T(np.swapaxes(x, 0, 1)).transpose(0, 1)))
    return out


# ------------------------------------------------------------------ matmul
MATMUL_SHAPES = [
    ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)),
    ((2, 3, 4), (4,)), ((4,), (2, 4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),
    ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (6, 4, 2)), ((2, 3, 1, 4), (3, 4, 5)),
    ((5, 1, 4), (1, 4, 1)), ((2, 2, 3, 4), (4, 6)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=[f"{a}@{b}" for a, b in MATMUL_SHAPES])
def test_matmul_broadcast_matches_numpy(sa, sb):
    a, b = rand(*sa), rand(*sb)
    want = np.matmul(a, b)
    for la, ta in layouts(a):
        for lb, tb in layouts(b):
            r = ember.matmul(ta, tb)
            assert r.dtype == ember.float64, (la, lb)
            close(r, want)
    close(T(a) @ T(b), want)
    close(T(a).matmul(T(b)), want)
    close(ember.linalg.matmul(T(a), T(b)), want)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.int8, np.uint8])
def test_matmul_integers_wrap_like_numpy(dtype):
    for sa, sb in MATMUL_SHAPES:
        a, b = rand(*sa, dtype=dtype), rand(*sb, dtype=dtype)
        r = ember.matmul(T(a), T(b))
        assert r.dtype == getattr(ember, np.dtype(dtype).name)
        np.testing.assert_array_equal(r.numpy(), np.matmul(a.astype(np.int64), b.astype(np.int64)).astype(dtype))
    big = np.full((2, 40), 100, dtype)  # products overflow the dtype: they wrap
    np.testing.assert_array_equal(ember.mm(T(big), T(big.T)).numpy(),
                                  (big.astype(np.int64) @ big.T.astype(np.int64)).astype(dtype))


@pytest.mark.parametrize("dtype,tol", [("float16", 2e-3), ("bfloat16", 1.6e-2)])
def test_matmul_half_types_compute_in_float32(dtype, tol):
    d = getattr(ember, dtype)
    for sa, sb in MATMUL_SHAPES + [((40, 70), (70, 30))]:
        a, b = T(rand(*sa)).to(d), T(rand(*sb)).to(d)
        want = np.matmul(a.float().numpy().astype(np.float64), b.float().numpy())
        r = a @ b
        assert r.dtype == d
        got = r.float().numpy()
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1, np.abs(want).max()))
        # rounding happens once, from the float32 result
        np.testing.assert_array_equal(got, (a.float() @ b.float()).to(d).float().numpy())


def test_matmul_empty_dims():
    assert ember.matmul(ember.ones(0, 3), ember.ones(3, 4)).shape == (0, 4)
    for sa, sb in [((2, 0), (0, 4)), ((5, 2, 0), (0, 4)), ((0,), (0,)), ((3, 0), (0,)), ((2, 3, 0), (2, 0, 4))]:
        a, b = T(np.full(sa, np.nan)), T(np.full(sb, np.nan))
        r = ember.matmul(a, b)
        assert r.shape == np.matmul(np.ones(sa), np.ones(sb)).shape
        assert (r.numpy() == 0).all(), "k = 0: a sum of nothing is 0"
    for dt in (ember.int64, ember.float16, ember.bool):  # bool: nothing to compute, so no error
        assert (ember.mm(ember.ones(2, 0, dtype=dt), ember.ones(0, 3, dtype=dt)).numpy() == 0).all()
    assert ember.bmm(ember.ones(0, 2, 3), ember.ones(0, 3, 4)).shape == (0, 2, 4)
    assert ember.matmul(ember.ones(3), ember.ones(0, 3, 4)).shape == (0, 4)


def test_matmul_out():
    a, b = rand(3, 4), rand(4, 5)
    out = ember.empty(5, 3, dtype=ember.float64).t()  # column-major: written in place, no copy
    assert ember.matmul(T(a), T(b), out=out) is out
    assert out.stride() == (1, 3)
    close(out, a @ b)
    out = ember.empty(0, dtype=ember.float64)
    ember.matmul(T(rand(2, 3, 4)), T(b), out=out)
    assert out.shape == (2, 3, 5)
    out = ember.empty(2, 5, 3, dtype=ember.float64).transpose(1, 2)  # batched, column-major
    a3 = rand(2, 3, 4)
    ember.bmm(T(a3), T(np.stack([b, b])), out=out)
    close(out, a3 @ b)
    with warnings.catch_warnings(record=True) as w:  # torch warns when it resizes a non-empty out
        warnings.simplefilter("always")
        ember.mm(T(a), T(b), out=ember.empty(7, dtype=ember.float64))
    assert any("resized" in str(x.message) for x in w)


def test_vector_products_into_a_0d_out():
    # the result's shape is empty (no sizes array): comparing it with out's
    # was a memcmp of a NULL pointer (UBSan, tests/test_ops.py::test_out[matmul-*])
    a, b = rand(4), rand(4)
    for fn in (ember.matmul, ember.dot, ember.vdot):
        out = ember.empty((), dtype=ember.float64)
        assert fn(T(a), T(b), out=out) is out and out.shape == ()
        close(out, np.dot(a, b))
        out = ember.empty(0, dtype=ember.float64)  # resized to 0-d
        fn(T(a), T(b), out=out)
        assert out.shape == ()
        close(out, np.dot(a, b))
    x = ember.tensor([3, -2, 7], dtype=ember.int16)
    out = ember.empty((), dtype=ember.int16)
    ember.matmul(x, x, out=out)
    assert out.item() == 62


def test_out_aliasing_an_input():
    a = rand(4, 4)
    x = T(a)
    ember.mm(x, x, out=x)
    close(x, a @ a)
    x = T(a)
    x.addmm_(x, x, beta=0.5)
    close(x, 0.5 * a + a @ a)


def test_fold_and_batch_strides():
    """N-D @ 2-D is one GEMM when the batch folds into rows; other batch
    layouts (permuted, broadcast, step-sliced) loop over GEMMs."""
    x, w = rand(4, 5, 6, 8), rand(7, 8)
    want = x @ w.T
    close(T(x) @ T(w).t(), want)
    close(T(np.swapaxes(x, 0, 1)).transpose(0, 1) @ T(w).t(), want)
    big = np.zeros((4, 10, 6, 8))
    big[:, ::2] = x
    close(T(big)[:, ::2] @ T(w).t(), want)
    close(T(x[:1]).expand(4, 5, 6, 8) @ T(w).t(), x[:1] @ w.T + np.zeros((4, 1, 1, 1)))
    close(T(w) @ T(np.swapaxes(x, -1, -2)), w @ np.swapaxes(x, -1, -2))


# ------------------------------------------------------------------ the other products
def test_products_match_numpy():
    a, b, v, u = rand(3, 4), rand(5, 4), rand(4), rand(3)
    close(ember.mv(T(a), T(v)), a @ v)
    close(ember.dot(T(v), T(v)), np.dot(v, v))
    close(ember.vdot(T(v), T(v[::-1])), np.vdot(v, v[::-1]))
    close(T(v).dot(T(v)), np.dot(v, v))
    close(ember.inner(T(a), T(b)), np.inner(a, b))
    x3 = rand(2, 3, 4)
    close(ember.inner(T(x3), T(b)), np.inner(x3, b))
    close(ember.inner(T(v), T(v)), np.inner(v, v))
    close(ember.inner(T(np.array(2.5)), T(a)), np.inner(2.5, a))
    close(ember.outer(T(u), T(v)), np.outer(u, v))
    close(ember.ger(T(u), T(v)), np.outer(u, v))
    close(T(u).outer(T(v)), np.outer(u, v))
    for sa, sb in [((2, 3), (3, 2)), ((2,), (2, 3)), ((2, 2, 1), (3,)), ((), (2,)), ((2, 3), ()), ((1, 2, 3), (2, 1, 2))]:
        x, y = rand(*sa), rand(*sb)
        close(ember.kron(T(x), T(y)), np.kron(x, y))
    for sh in [(3, 3), (2, 5), (5, 2), (0, 3), (1, 1)]:
        m = rand(*sh)
        close(ember.trace(T(m)), np.trace(m))
        close(T(m).trace(), np.trace(m))
    assert ember.trace(T(rand(3, 3, dtype=np.int8))).dtype == ember.int64
    assert ember.trace(T(rand(3, 3)).to(ember.float16)).dtype == ember.float16
    close(ember.trace(T(np.arange(9.0).reshape(3, 3)).t()), 12.0)


def test_vectors_with_strides():
    v = rand(20)
    close(ember.dot(T(v)[::3], T(v)[1::3]), np.dot(v[::3], v[1::3]))
    close(ember.dot(T(v[:1]).expand(7), T(v[:7])), v[0] * v[:7].sum())
    m = rand(6, 20)
    close(ember.mv(T(m)[:, ::4], T(v)[::4]), m[:, ::4] @ v[::4])
    close(ember.mv(T(m.T).t(), T(v)), m @ v)


def test_promoting_products():
    """outer / ger / addr / kron promote like multiplication; bool works."""
    i, f = np.array([1, 2, 3], np.int32), np.array([0.5, 1.5], np.float32)
    r = ember.outer(T(i), T(f))
    assert r.dtype == ember.float32
    close(r, np.outer(i, f))
    b = np.array([True, False, True])
    r = ember.outer(T(b), T(b))
    assert r.dtype == ember.bool
    np.testing.assert_array_equal(r.numpy(), np.outer(b, b))
    r = ember.kron(T(i), T(np.array([True, False])))
    assert r.dtype == ember.int32
    np.testing.assert_array_equal(r.numpy(), np.kron(i, [1, 0]))
    r = ember.addr(T(np.ones((3, 2), np.int64)), T(i), T(f))
    assert r.dtype == ember.float32
    close(r, 1 + np.outer(i, f))
    s = np.array([[True, False], [False, False], [True, True]])
    r = ember.addr(T(s), T(b), T(np.array([True, False])))
    np.testing.assert_array_equal(r.numpy(), s | np.outer(b, [True, False]))
    r = ember.addr(T(s), T(b), T(np.array([True, False])), beta=False)
    np.testing.assert_array_equal(r.numpy(), np.outer(b, [True, False]))


# ------------------------------------------------------------------ beta and alpha
NAN = float("nan")


@pytest.mark.parametrize("op", ["addmm", "addmv", "baddbmm", "addbmm", "addr"])
def test_beta_zero_ignores_input(op):
    shapes = {"addmm": ((3, 5), (3, 4), (4, 5)), "addmv": ((3,), (3, 4), (4,)),
              "baddbmm": ((2, 3, 5), (2, 3, 4), (2, 4, 5)), "addbmm": ((3, 5), (2, 3, 4), (2, 4, 5)),
              "addr": ((3, 5), (3,), (5,))}[op]
    s, a, b = (rand(*sh) for sh in shapes)
    prod = {"addmm": lambda: a @ b, "addmv": lambda: a @ b, "baddbmm": lambda: a @ b,
            "addbmm": lambda: (a @ b).sum(0), "addr": lambda: np.outer(a, b)}[op]()
    fn = getattr(ember, op)
    for bad in (NAN, float("inf")):
        r = fn(T(np.full(shapes[0], bad)), T(a), T(b), beta=0, alpha=2)
        close(r, 2 * prod)
        x = T(np.full(shapes[0], bad))
        assert getattr(x, op + "_")(T(a), T(b), beta=0) is x
        close(x, prod)
    close(fn(T(s), T(a), T(b), beta=0.5, alpha=-2), 0.5 * s - 2 * prod)
    close(fn(T(s), T(a), T(b)), s + prod)
    if op != "addr":  # BLAS semantics: alpha == 0 does not read the matrices
        r = fn(T(s), T(np.full(a.shape, NAN)), T(b), alpha=0, beta=3)
        close(r, 3 * s + 0 * prod)
    else:  # torch's addr multiplies: 0 * NaN is NaN
        assert np.isnan(fn(T(s), T(np.full(a.shape, NAN)), T(b), alpha=0).numpy()).all()


def test_k_zero_gives_beta_times_input():
    s = rand(3, 5)
    close(ember.addmm(T(s), ember.ones(3, 0, dtype=ember.float64), ember.ones(0, 5, dtype=ember.float64), beta=2), 2 * s)
    close(ember.addmm(T(np.full((3, 5), NAN)), ember.ones(3, 0, dtype=ember.float64),
                      ember.ones(0, 5, dtype=ember.float64), beta=0), np.zeros((3, 5)))
    close(ember.addbmm(T(s), ember.ones(0, 3, 4, dtype=ember.float64), ember.ones(0, 4, 5, dtype=ember.float64),
                       beta=-1), -s)


def test_integer_alpha_beta():
    s = np.array([1, 2, 3])
    a, e = np.array([[1, 2, 3]]), np.eye(3, dtype=np.int64)
    # torch converts a float alpha/beta to the integer dtype (truncating) in addmm & co
    np.testing.assert_array_equal(ember.addmm(T(s), T(a), T(e), alpha=1.5).numpy(), [[2, 4, 6]])
    np.testing.assert_array_equal(ember.addmm(T(s), T(a), T(e), beta=2.7).numpy(), [[3, 6, 9]])
    np.testing.assert_array_equal(ember.addmm(T(s), T(a), T(e), beta=True, alpha=False).numpy(), [[1, 2, 3]])
    # ... but addr is elementwise and refuses them, as torch does
    with pytest.raises(RuntimeError, match="must not be a floating point number"):
        ember.addr(T(np.ones((2, 2), np.int64)), T(np.ones(2, np.int64)), T(np.ones(2, np.int64)), alpha=1.5)


def test_addbmm_inplace_resizes_like_torch():
    s = ember.arange(4.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch resizes self silently here
        r = s.addbmm_(ember.ones(2, 3, 5), ember.ones(2, 5, 4))
    assert r is s and s.shape == (3, 4)
    close(s, np.arange(4.0) + np.full((3, 4), 10.0))


# ------------------------------------------------------------------ einsum
EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ij,jk->ki", [(2, 3), (3, 4)]),
    ("ii", [(3, 3)]), ("ii->i", [(3, 3)]), ("ij->", [(3, 4)]), ("ij->j", [(3, 4)]), ("ji", [(2, 3)]),
    ("i,j", [(2,), (3,)]), ("i,i", [(4,), (4,)]), ("i,i->i", [(4,), (4,)]), ("i,j->", [(2,), (3,)]),
    ("...ij,...jk", [(5, 2, 3), (3, 4)]), ("...ij,...jk->...ik", [(2, 1, 2, 3), (4, 3, 4)]),
    ("bij,bjk->bik", [(5, 2, 3), (5, 3, 4)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]), ("i...j,j...k", [(2, 7, 3), (3, 7, 4)]),
    ("...ii->...i", [(2, 3, 3)]), ("ijj,jk->ik", [(2, 3, 3), (3, 4)]), ("iij", [(3, 3, 4)]),
    ("ij,kl->ijkl", [(2, 3), (4, 5)]), ("a,b,c", [(2,), (3,), (4,)]), ("ab,bc,cd", [(2, 3), (3, 4), (4, 5)]),
    ("ij,ij->", [(2, 3), (2, 3)]), ("ij,ij->i", [(2, 3), (2, 3)]), ("ij,k->", [(2, 3), (3,)]),
    ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]), ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 6)]),
    ("...a,...a->...", [(2, 3, 4), (3, 4)]), ("a...,...->a...", [(2, 3), (4, 3)]), ("ijk->kji", [(2, 3, 4)]),
    ("Ab,bC->AC", [(2, 3), (3, 4)]), ("iJ", [(2, 3)]), ("i j , j k -> i k", [(2, 3), (3, 4)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]), ("...", [(2, 3)]), ("...->", [(2, 3)], "ij->"), ("->", [()]),
    ("", [()]), (",->", [(), ()]), ("i,->i", [(3,), ()]), ("ij,jk->ik", [(2, 0), (0, 3)]), ("ii->", [(0, 0)]),
]


@pytest.mark.parametrize("eq,shapes,np_eq", [e + (None,) * (3 - len(e)) for e in EINSUM], ids=[e[0] for e in EINSUM])
def test_einsum_matches_numpy(eq, shapes, np_eq):
    xs = [rand(*s) for s in shapes]
    want = np.einsum(np_eq or eq.replace(" ", ""), *xs)  # np_eq: NumPy has no "...->" sum
    close(ember.einsum(eq, *[T(x) for x in xs]), want)
    close(ember.einsum(eq, [T(x) for x in xs]), want)  # operands as one list
    variants = [layouts(x) for x in xs]
    for i in range(max(len(v) for v in variants)):  # every operand in its i-th layout
        close(ember.einsum(eq, *[v[min(i, len(v) - 1)][1] for v in variants]), want)


def test_einsum_integers_and_dtypes():
    a, b = rand(2, 3, dtype=np.int8), rand(3, 4, dtype=np.int8)
    r = ember.einsum("ij,jk->ik", T(a), T(b))
    assert r.dtype == ember.int8
    np.testing.assert_array_equal(r.numpy(), np.einsum("ij,jk->ik", a.astype(np.int64), b).astype(np.int8))
    r = ember.einsum("ij->", T(a))  # a sum: int64, like torch.sum
    assert r.dtype == ember.int64 and r.item() == a.astype(np.int64).sum()
    assert ember.einsum("ii", T(rand(3, 3, dtype=np.int16))).dtype == ember.int64
    assert ember.einsum("ij->j", ember.ones(2, 3, dtype=ember.bool)).dtype == ember.int64
    r = ember.einsum("i,j", T(np.array([True, False])), T(np.array([True, True, False])))
    assert r.dtype == ember.bool
    assert ember.einsum("i,j", ember.ones(2), ember.ones(3, dtype=ember.float64)).dtype == ember.float64
    h = ember.einsum("ij,jk", ember.ones(2, 3, dtype=ember.float16), ember.ones(3, 4, dtype=ember.float16))
    assert h.dtype == ember.float16 and (h.float().numpy() == 3).all()
    with pytest.raises(NotImplementedError):
        ember.einsum("i,i", ember.ones(2, dtype=ember.bool), ember.ones(2, dtype=ember.bool))


def test_einsum_views_and_sublists():
    x = T(rand(2, 3))
    for eq in ("ij", "ji", "ij->ij"):  # no product, no sum: a view, as in torch
        assert ember.einsum(eq, x).data_ptr() == x.data_ptr()
    d = T(rand(3, 3))
    v = ember.einsum("ii->i", d)
    assert v.data_ptr() == d.data_ptr() and v.stride() == (4,)
    a, b = rand(2, 3), rand(3, 4)
    close(ember.einsum(T(a), [0, 1], T(b), [1, 2], [0, 2]), a @ b)
    close(ember.einsum(T(a), [0, 1], T(b), [1, 2]), a @ b)
    x5 = rand(5, 2, 3)
    close(ember.einsum(T(x5), [Ellipsis, 0, 1], T(b), [1, 2], [Ellipsis, 0, 2]), x5 @ b)
    with pytest.raises(ValueError):
        ember.einsum(T(a), [0, 60])
    with pytest.raises(ValueError):
        ember.einsum("ij")
    with pytest.raises(TypeError):
        ember.einsum("ij,jk", T(a), 3)


# ------------------------------------------------------------------ big inputs: the threaded paths
def test_integer_blocked_loop_large():
    a, b = rand(130, 700, dtype=np.int64), rand(700, 600, dtype=np.int64)  # crosses every tile edge
    np.testing.assert_array_equal(ember.mm(T(a), T(b)).numpy(), a @ b)
    np.testing.assert_array_equal(ember.mm(T(a.T).t(), T(b.T).t()).numpy(), a @ b)
    i32 = a.astype(np.int32)
    np.testing.assert_array_equal(ember.addmm(T(i32[:, :600]), T(i32), T(b.astype(np.int32)), beta=2, alpha=-3).numpy(),
                                  (2 * i32[:, :600] - 3 * (i32.astype(np.int64) @ b)).astype(np.int32))


def test_batched_small_gemms_split_across_threads():
    for dtype in (np.float32, np.float64, np.int64):
        a, b = rand(32, 64, 64, dtype=dtype), rand(32, 64, 64, dtype=dtype)
        want = a.astype(np.float64) @ b.astype(np.float64)
        close(ember.bmm(T(a), T(b)), want, 1e-5)
        close(ember.bmm(T(a).transpose(1, 2), T(b)), np.swapaxes(a, 1, 2).astype(np.float64) @ b, 1e-5)
        close(ember.baddbmm(T(a), T(a), T(b), beta=-1), -a + want, 1e-5)
        close(ember.addbmm(T(a[0]), T(a), T(b)), a[0] + want.sum(0), 1e-5)


def test_large_float_products():
    a, b = rand(300, 200, dtype=np.float32), rand(200, 250, dtype=np.float32)
    want = a.astype(np.float64) @ b
    close(T(a) @ T(b), want, 1e-5)
    close(T(a.T).t() @ T(b.T).t(), want, 1e-5)
    close(ember.addmm(T(want[:1].astype(np.float32)), T(a), T(b), beta=0.5, alpha=2), 0.5 * want[:1] + 2 * want, 1e-5)
    v = rand(200, dtype=np.float32)
    close(ember.mv(T(a), T(v)), a.astype(np.float64) @ v, 1e-5)


def test_matmul_releases_the_gil():
    x = T(rand(256, 256, dtype=np.float32))
    want = (x @ x).numpy()
    results = [None] * 4

    def work(i):
        results[i] = (x @ x).numpy()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, want)


# ------------------------------------------------------------------ errors and torch parity
def test_errors():
    with pytest.raises(RuntimeError, match="both arguments to matmul need to be at least 1D"):
        ember.matmul(ember.ones(()), ember.ones(3))
    with pytest.raises(RuntimeError, match=r"mm: mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        ember.ones(2, 3) @ ember.ones(4, 5)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but got: int != long int"):
        ember.mm(ember.ones(2, 3, dtype=ember.int32), ember.ones(3, 2, dtype=ember.int64))
    with pytest.raises(NotImplementedError, match="\"addmm_impl_cpu_\" not implemented for 'Bool'"):
        ember.mm(ember.ones(2, 3, dtype=ember.bool), ember.ones(3, 2, dtype=ember.bool))
    with pytest.raises(NotImplementedError, match="\"bmm\" not implemented for 'Bool'"):
        ember.ones(2, 2, 3, dtype=ember.bool) @ ember.ones(2, 3, 2, dtype=ember.bool)
    with pytest.raises(TypeError):
        ember.ones(2, 2) @ 2
    with pytest.raises(RuntimeError, match="einsum\\(\\): output subscript i appears more than once"):
        ember.einsum("ij->ii", ember.ones(2, 3))


@needs_torch
@pytest.mark.parametrize("eq,shapes", [e[:2] for e in EINSUM], ids=[e[0] for e in EINSUM])
@pytest.mark.parametrize("dtype", ["int8", "int32", "bool", "float16"])
def test_einsum_dtype_rules_match_torch(eq, shapes, dtype):
    """Which equations sum integers to int64, or reach bmm with bool (an error)."""
    xs = [RNG.integers(0, 3, s) for s in shapes]

    def run(L):
        try:
            r = L.einsum(eq, *[L.from_numpy(x).to(getattr(L, dtype)) for x in xs])
        except Exception as e:  # noqa: BLE001
            return type(e), str(e)
        return str(r.dtype).split(".")[-1], r.shape, r.to(L.float64).numpy()
    t, e = run(torch), run(ember)
    assert t[0] == e[0] and t[1] == e[1]
    if len(t) == 3:
        np.testing.assert_allclose(e[2], t[2], rtol=1e-2)
