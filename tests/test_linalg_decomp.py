"""ember.linalg's LAPACK decompositions and what is built on them
(python/ember/linalg/, csrc/ops/lapack.c): values against NumPy's
np.linalg, reconstruction identities (Q R == A, U diag(S) Vh == A, L L^T ==
A, P L U == A), batches, float32/float64, empty matrices, non-finite input;
gradients (and second derivatives) against central finite differences
computed here (float64) and against torch when installed; torch's errors for
singular, non-square, integer and mismatched input. A build without LAPACK
runs only test_no_lapack."""
import math

import numpy as np
import pytest

import ember

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

LA = ember.linalg
RNG = np.random.default_rng(7)
# a build without OpenBLAS (the GPU machine's) has no LAPACK: only test_no_lapack runs there
HAS_LAPACK = bool(ember._C._has_lapack)


@pytest.fixture(autouse=True)
def _needs_lapack(request):
    if not HAS_LAPACK and request.node.name != "test_no_lapack":
        pytest.skip("ember was built without LAPACK")
DTYPES = [np.float32, np.float64]
BATCHES = [(), (3,), (2, 2)]


def T(x, requires_grad=False):
    t = ember.from_numpy(np.array(x, order="C"))
    return t.requires_grad_(True) if requires_grad else t


def N(t):
    return t.detach().numpy()


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def spd(*shape, dtype=np.float64):
    """Symmetric positive-definite matrices (..., n, n), shape = (..., n)."""
    x = rand(*shape, shape[-1])
    return (x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def well(*shape, dtype=np.float64):
    """Square matrices far from singular."""
    return (rand(*shape) + 2 * shape[-1] ** 0.5 * np.eye(shape[-1])).astype(dtype)


def tol(dtype):
    return 2e-4 if dtype == np.float32 else 1e-10


def close(got, want, t=1e-10):
    got = N(got) if isinstance(got, ember.Tensor) else np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=t, atol=t * scale)


def mT(x):
    return np.swapaxes(x, -1, -2)


def fd_grad(f, x, eps=1e-6):
    """Central finite differences of the scalar f(ember tensor) at numpy x."""
    g = np.zeros_like(x)
    flat, gf = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        hi = float(f(T(x)))
        flat[i] = old - eps
        lo = float(f(T(x)))
        flat[i] = old
        gf[i] = (hi - lo) / (2 * eps)
    return g


def check_grad(f, x, t=1e-6):
    """f's gradient by ember's backward against finite differences."""
    xt = T(x, True)
    f(xt).backward()
    close(xt.grad, fd_grad(f, x.copy()), t)


# -- values against NumPy ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
def test_inv_det_slogdet_solve(dtype, batch):
    a = well(*batch, 4, 4, dtype=dtype)
    b = rand(*batch, 4, 2, dtype=dtype)
    A = T(a)
    close(LA.inv(A), np.linalg.inv(a), tol(dtype))
    close(LA.det(A), np.linalg.det(a), tol(dtype))
    sign, logabs = LA.slogdet(A)
    ws, wl = np.linalg.slogdet(a)
    close(sign, ws, 0)
    close(logabs, wl, tol(dtype))
    close(LA.solve(A, T(b)), np.linalg.solve(a, b), tol(dtype))
    assert LA.inv(A).dtype == A.dtype and LA.det(A).dtype == A.dtype
    # left=False: X A = B
    c = rand(*batch, 2, 4, dtype=dtype)
    close(LA.solve(A, T(c), left=False), mT(np.linalg.solve(mT(a), mT(c))), tol(dtype))


def test_solve_vector_and_broadcast():
    a, b = well(2, 3, 3), rand(3)
    close(LA.solve(T(a), T(b)), np.linalg.solve(a, b[None, :, None])[..., 0])
    bb = rand(2, 3)  # a batch of vectors: B.shape == A.shape[:-1]
    close(LA.solve(T(a), T(bb)), np.linalg.solve(a, bb[..., None])[..., 0])
    a1, b4 = well(3, 3), rand(4, 1, 3, 2)  # batch dims broadcast
    close(LA.solve(T(a1), T(b4)), np.linalg.solve(a1, b4))


def test_singular_det_is_zero_and_ex_variants():
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert abs(float(LA.det(T(a)))) < 1e-12
    sign, logabs = LA.slogdet(T(a))
    assert float(sign) == 0 and float(logabs) == -math.inf
    inv, info = LA.inv_ex(T(np.stack([np.eye(2), a])))
    assert info.tolist() == [0, 2] and info.dtype == ember.int32
    close(inv[0], np.eye(2))
    res, info = LA.solve_ex(T(a), T(np.ones(2)))
    assert int(info) == 2
    LU, piv, info = LA.lu_factor_ex(T(np.zeros((3, 3))))
    assert int(info) == 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
def test_cholesky(dtype, batch):
    a = spd(*batch, 5, dtype=dtype)
    L = LA.cholesky(T(a))
    close(L, np.linalg.cholesky(a), tol(dtype))
    U = LA.cholesky(T(a), upper=True)
    close(mT(N(U)) @ N(U), a, tol(dtype) * 10)
    L2, info = LA.cholesky_ex(T(a))
    close(L2, N(L), 0)
    assert N(info).shape == batch and not N(info).any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 5, 3), (2, 3, 5)])
def test_qr_reconstructs(dtype, shape):
    a = rand(*shape, dtype=dtype)
    m, n = shape[-2:]
    k = min(m, n)
    Q, R = LA.qr(T(a))
    assert Q.shape == (*shape[:-2], m, k) and R.shape == (*shape[:-2], k, n)
    close(N(Q) @ N(R), a, tol(dtype) * 10)
    close(mT(N(Q)) @ N(Q), np.broadcast_to(np.eye(k), (*shape[:-2], k, k)), tol(dtype) * 10)
    assert np.allclose(N(R), np.triu(N(R)))
    # R matches NumPy's up to the signs of its rows
    Rn = np.linalg.qr(a, mode="r")
    close(np.abs(N(R)), np.abs(Rn), tol(dtype) * 10)
    Qc, Rc = LA.qr(T(a), mode="complete")
    assert Qc.shape == (*shape[:-2], m, m) and Rc.shape == (*shape[:-2], m, n)
    close(N(Qc) @ N(Rc), a, tol(dtype) * 10)
    close(mT(N(Qc)) @ N(Qc), np.broadcast_to(np.eye(m), (*shape[:-2], m, m)), tol(dtype) * 10)
    Qr, Rr = LA.qr(T(a), mode="r")
    assert Qr.shape == (0,)
    close(Rr, N(R), 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (3, 4, 2)])
def test_svd_reconstructs(dtype, shape):
    a = rand(*shape, dtype=dtype)
    m, n = shape[-2:]
    k = min(m, n)
    U, S, Vh = LA.svd(T(a), full_matrices=False)
    close(S, np.linalg.svd(a, compute_uv=False), tol(dtype))
    close((N(U) * N(S)[..., None, :]) @ N(Vh), a, tol(dtype) * 10)
    assert U.shape == (*shape[:-2], m, k) and Vh.shape == (*shape[:-2], k, n)
    Uf, Sf, Vhf = LA.svd(T(a))  # full_matrices=True is the default
    assert Uf.shape == (*shape[:-2], m, m) and Vhf.shape == (*shape[:-2], n, n)
    close(mT(N(Uf)) @ N(Uf), np.broadcast_to(np.eye(m), (*shape[:-2], m, m)), tol(dtype) * 10)
    close(N(Vhf) @ mT(N(Vhf)), np.broadcast_to(np.eye(n), (*shape[:-2], n, n)), tol(dtype) * 10)
    close(LA.svdvals(T(a)), np.linalg.svd(a, compute_uv=False), tol(dtype))
    # the old API: V, not Vh; some=True is reduced
    U2, S2, V2 = ember.svd(T(a))
    close((N(U2) * N(S2)[..., None, :]) @ mT(N(V2)), a, tol(dtype) * 10)
    U3, S3, V3 = ember.svd(T(a), compute_uv=False)
    assert not N(U3).any() and U3.shape == (*shape[:-2], m, m) and V3.shape == (*shape[:-2], n, n)
    close(S3, N(S), tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
def test_eigh(dtype, batch):
    a = rand(*batch, 5, 5, dtype=dtype)
    a = (a + mT(a)).astype(dtype)
    w, V = LA.eigh(T(a))
    close(w, np.linalg.eigvalsh(a), tol(dtype) * 10)
    close((N(V) * N(w)[..., None, :]) @ mT(N(V)), a, tol(dtype) * 10)
    close(LA.eigvalsh(T(a)), np.linalg.eigvalsh(a), tol(dtype) * 10)
    # UPLO: only that triangle is read
    lower = np.tril(a) + 7 * np.triu(np.ones_like(a), 1)
    close(LA.eigvalsh(T(lower)), np.linalg.eigvalsh(a), tol(dtype) * 10)
    upper = np.triu(a) + 7 * np.tril(np.ones_like(a), -1)
    close(LA.eigvalsh(T(upper), UPLO="U"), np.linalg.eigvalsh(a, UPLO="U"), tol(dtype) * 10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_family(dtype):
    for shape in [(4, 4), (5, 3), (3, 5), (2, 4, 4)]:
        a = rand(*shape, dtype=dtype)
        P, L, U = LA.lu(T(a))
        close(N(P) @ N(L) @ N(U), a, tol(dtype) * 10)
        assert np.allclose(N(L), np.tril(N(L))) and np.allclose(np.diagonal(N(L), 0, -2, -1), 1)
        assert np.allclose(N(U), np.triu(N(U)))
        LU, piv = LA.lu_factor(T(a))
        assert piv.dtype == ember.int32 and piv.shape == (*shape[:-2], min(shape[-2:]))
        P2, L2, U2 = ember.lu_unpack(LU, piv)
        close(P2, N(P), 0)
    a, b = well(2, 4, 4, dtype=dtype), rand(2, 4, 3, dtype=dtype)
    LU, piv = LA.lu_factor(T(a))
    close(LA.lu_solve(LU, piv, T(b)), np.linalg.solve(a, b), tol(dtype) * 10)
    close(LA.lu_solve(LU, piv, T(b), adjoint=True), np.linalg.solve(mT(a), b), tol(dtype) * 10)
    c = rand(2, 3, 4, dtype=dtype)
    close(LA.lu_solve(LU, piv, T(c), left=False), mT(np.linalg.solve(mT(a), mT(c))), tol(dtype) * 10)
    close(ember.lu_solve(T(b), LU, piv), np.linalg.solve(a, b), tol(dtype) * 10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_triangular(dtype):
    a, b = well(2, 4, 4, dtype=dtype), rand(2, 4, 3, dtype=dtype)
    up, lo = np.triu(a), np.tril(a)
    close(LA.solve_triangular(T(a), T(b), upper=True), np.linalg.solve(up, b), tol(dtype) * 10)
    close(LA.solve_triangular(T(a), T(b), upper=False), np.linalg.solve(lo, b), tol(dtype) * 10)
    unit = np.tril(a, -1) + np.eye(4)
    close(LA.solve_triangular(T(a), T(b), upper=False, unitriangular=True), np.linalg.solve(unit, b),
          tol(dtype) * 10)
    c = rand(2, 3, 4, dtype=dtype)
    close(LA.solve_triangular(T(a), T(c), upper=True, left=False), mT(np.linalg.solve(mT(up), mT(c))),
          tol(dtype) * 10)
    X, A2 = ember.triangular_solve(T(b), T(a), upper=True, transpose=True)
    close(X, np.linalg.solve(mT(up), b), tol(dtype) * 10)
    close(A2, a, 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_solve_inverse(dtype):
    a, b = spd(2, 4, dtype=dtype), rand(2, 4, 3, dtype=dtype)
    L = LA.cholesky(T(a))
    close(ember.cholesky_solve(T(b), L), np.linalg.solve(a, b), tol(dtype) * 10)
    close(ember.cholesky_solve(T(b), L.mT, upper=True), np.linalg.solve(a, b), tol(dtype) * 10)
    close(ember.cholesky_inverse(L), np.linalg.inv(a), tol(dtype) * 10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstsq_pinv_rank_cond(dtype):
    a, b = rand(2, 6, 3, dtype=dtype), rand(2, 6, 2, dtype=dtype)
    res = LA.lstsq(T(a), T(b), driver="gelsd")
    want = np.stack([np.linalg.lstsq(a[i], b[i], rcond=None)[0] for i in range(2)])
    close(res.solution, want, tol(dtype) * 10)
    close(res.residuals, ((a @ want - b) ** 2).sum(-2), tol(dtype) * 100)
    assert res.rank.tolist() == [3, 3] and res.rank.dtype == ember.int64
    close(res.singular_values, np.linalg.svd(a, compute_uv=False), tol(dtype) * 10)
    close(LA.lstsq(T(a[0]), T(b[0, :, 0])).solution, want[0, :, 0], tol(dtype) * 10)  # vector B
    close(LA.pinv(T(a)), np.linalg.pinv(a), tol(dtype) * 10)
    s = spd(3, dtype=dtype)
    close(LA.pinv(T(s), hermitian=True), np.linalg.pinv(s, hermitian=True), tol(dtype) * 10)
    rt = np.array([0.5, 1e-9])  # one tolerance per matrix: the first drops its smaller singular values
    want = np.stack([np.linalg.pinv(a[i], rcond=rt[i]) for i in range(2)])
    close(LA.pinv(T(a), rtol=T(rt.astype(dtype))), want, tol(dtype) * 10)
    close(ember.pinverse(T(a)), np.linalg.pinv(a), tol(dtype) * 10)
    deficient = a.copy()
    deficient[..., 2] = deficient[..., 1]
    assert LA.matrix_rank(T(deficient)).tolist() == [2, 2]
    assert LA.matrix_rank(T(a)).tolist() == [3, 3]
    assert int(LA.matrix_rank(T(s), hermitian=True)) == 3
    close(LA.lstsq(T(deficient[0]), T(b[0]), driver="gelsd").solution,
          np.linalg.lstsq(deficient[0], b[0], rcond=None)[0], tol(dtype) * 100)
    sq = well(2, 4, 4, dtype=dtype)
    for p in [None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf]:
        close(LA.cond(T(sq), p), np.linalg.cond(sq, p), tol(dtype) * 100)
    assert float(LA.cond(T(np.zeros((3, 3), dtype)), "fro")) == math.inf


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_norm_spectral(dtype):
    a = rand(2, 4, 3, dtype=dtype)
    for o in [2, -2, "nuc"]:
        close(LA.matrix_norm(T(a), o), np.linalg.norm(a, o, axis=(-2, -1)), tol(dtype) * 10)
        close(LA.norm(T(a[0]), o), np.linalg.norm(a[0], o), tol(dtype) * 10)
    close(LA.matrix_norm(T(a), 2, dim=(0, 2), keepdim=True),
          np.linalg.norm(a, 2, axis=(0, 2), keepdims=True), tol(dtype) * 10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_power_exp(dtype):
    a = well(2, 3, 3, dtype=dtype)
    for n in [0, 1, 2, 5, -1, -3]:
        close(LA.matrix_power(T(a), n), np.linalg.matrix_power(a, n), tol(dtype) * 100)
    close(T(a).matrix_power(3), np.linalg.matrix_power(a, 3), tol(dtype) * 100)
    # exp of a diagonalizable matrix: V exp(D) V^-1; scaling and squaring is exercised by the large norm
    s = rand(2, 4, 4)
    s = s + mT(s)
    for scale in [0.1, 1.0, 8.0]:
        w, V = np.linalg.eigh(s * scale)
        want = (V * np.exp(w)[..., None, :]) @ mT(V)
        close(LA.matrix_exp(T((s * scale).astype(dtype))), want, 1e-4 if dtype == np.float32 else 1e-9)
    nil = np.array([[0.0, 1.0], [0.0, 0.0]], dtype)  # exp = I + N
    close(ember.matrix_exp(T(nil)), np.eye(2) + nil, tol(dtype))


def test_multi_dot_cross_vecdot_tensorinv():
    x, A, B, y = rand(3), rand(3, 4), rand(4, 5), rand(5)
    close(LA.multi_dot([T(x), T(A), T(B), T(y)]), x @ A @ B @ y)
    close(LA.multi_dot([T(A), T(B)]), A @ B)
    u, v = rand(2, 3), rand(2, 3)
    close(LA.cross(T(u), T(v)), np.cross(u, v))
    close(ember.cross(T(u.T.copy()), T(v.T.copy()), dim=0), np.cross(u, v).T)
    close(T(u).cross(T(v)), np.cross(u, v))
    close(LA.vecdot(T(u), T(v)), (u * v).sum(-1))
    close(LA.vander(T(u)), np.vander(u.ravel(), 3, increasing=True).reshape(2, 3, 3))
    close(LA.vander(T(u), N=5), np.stack([np.vander(r, 5, increasing=True) for r in u]))
    assert LA.vander(ember.tensor([1, 2, 3])).tolist() == [[1, 1, 1], [1, 2, 4], [1, 3, 9]]
    with pytest.raises(RuntimeError, match="N must be greater than 1"):
        LA.vander(T(u), N=1)
    wv = rand(2, 3, 4)
    check_grad(lambda X: (LA.vander(X, N=4) * T(wv)).sum(), u)
    d = rand(2, 3, 3)
    close(LA.diagonal(T(d), offset=1), np.diagonal(d, 1, -2, -1))
    t = well(6, 6).reshape(2, 3, 6)
    close(LA.tensorinv(T(t), ind=2), np.linalg.tensorinv(t, ind=2))
    a, b = well(6, 6).reshape(2, 3, 6), rand(2, 3)
    close(LA.tensorsolve(T(a), T(b)), np.linalg.tensorsolve(a, b))


def test_householder_product():
    """From NumPy's raw QR (LAPACK geqrf's reflectors and tau), Q equals NumPy's;
    with a gradient the product is composed of ember ops and must agree."""
    a = rand(2, 5, 3)
    raw = [np.linalg.qr(a[i], mode="raw") for i in range(2)]
    h = np.stack([np.ascontiguousarray(r[0].T) for r in raw])
    tau = np.stack([r[1] for r in raw])
    want = np.linalg.qr(a)[0]
    close(LA.householder_product(T(h), T(tau)), want)
    close(LA.householder_product(T(h, True), T(tau)), want)
    close(LA.householder_product(T(h[..., :2]), T(tau[..., :2])), np.linalg.qr(a[..., :2])[0])


def test_geqrf_orgqr_ormqr():
    for shape in [(5, 3), (3, 3), (3, 5)]:
        a = rand(*shape)
        h, tau = ember.geqrf(T(a))
        hn, taun = np.linalg.qr(a, mode="raw")  # LAPACK's geqrf, transposed
        close(h, hn.T)
        close(tau, taun)
        if shape[0] >= shape[1]:
            close(ember.orgqr(h, tau), np.linalg.qr(a)[0])
        Qc = np.linalg.qr(a, mode="complete")[0]
        c = rand(shape[0], 2)
        close(ember.ormqr(h, tau, T(c)), Qc @ c)
        close(ember.ormqr(h, tau, T(c), transpose=True), Qc.T @ c)
        close(h.ormqr(tau, T(c.T.copy()), left=False), c.T @ Qc)
    with pytest.raises(RuntimeError, match=r"other.shape\[-2\] must be equal to input.shape\[-2\]"):
        ember.ormqr(h, tau, T(rand(4, 2)))


def test_tensor_methods_and_torch_names():
    a = well(3, 3)
    A = T(a)
    close(A.inverse(), np.linalg.inv(a))
    close(A.det(), np.linalg.det(a))
    close(ember.inverse(A), np.linalg.inv(a))
    close(ember.det(A), np.linalg.det(a))
    s = spd(3)
    close(ember.logdet(T(s)), np.linalg.slogdet(s)[1])
    assert math.isnan(float(ember.logdet(T(-np.eye(3)))))
    sign, logabs = A.slogdet()
    close(sign * ember.exp(logabs), np.linalg.det(a))
    with pytest.raises(RuntimeError, match="torch.qr` is deprecated in favor of `torch.linalg.qr`"):
        A.qr()  # removed in torch 2, as torch.cholesky
    U, S, V = A.svd()
    close((N(U) * N(S)) @ N(V).T, a)
    assert type(LA.svd(A)).__name__ == "linalg_svd" and "Vh=" in repr(LA.svd(A))
    assert type(ember.svd(A)).__name__ == "svd"
    assert LA.eigh(T(s)).eigenvalues.shape == (3,)
    assert LA.LinAlgError.__mro__[1] is RuntimeError
    Lf, piv = A.lu()
    close(Lf, N(LA.lu_factor(A).LU))


def test_out_arguments():
    a = well(2, 3, 3)
    o = ember.empty(2, 3, 3, dtype=ember.float64)
    r = LA.inv(T(a), out=o)
    assert r is o
    close(o, np.linalg.inv(a))
    Q, R = ember.empty(2, 3, 3, dtype=ember.float64), ember.empty(2, 3, 3, dtype=ember.float64)
    res = LA.qr(T(a), out=(Q, R))
    assert res.Q is Q and res.R is R
    close(N(Q) @ N(R), a)
    w, V = ember.empty(2, 3, dtype=ember.float64), ember.empty(2, 3, 3, dtype=ember.float64)
    s = a + mT(a)
    LA.eigh(T(s), out=(w, V))
    close(w, np.linalg.eigvalsh(s))
    with pytest.raises(RuntimeError, match="shape"):
        LA.inv(T(a), out=ember.empty(3, 3, dtype=ember.float64))
    LU, piv = ember.empty(2, 3, 3, dtype=ember.float64), ember.empty(2, 3, dtype=ember.int32)
    r = ember.lu(T(a), out=(LU, piv))
    assert r[0] is LU and r[1] is piv
    close(LU, N(LA.lu_factor(T(a)).LU))


def test_empty():
    for n in [0]:
        z = T(np.zeros((n, n)))
        assert LA.inv(z).shape == (0, 0)
        assert float(LA.det(z)) == 1.0
        assert LA.det(T(np.zeros((2, 0, 0)))).tolist() == [1.0, 1.0]
        assert LA.cholesky(z).shape == (0, 0)
        sign, logabs = LA.slogdet(z)
        assert float(sign) == 1 and float(logabs) == 0
    U, S, Vh = LA.svd(T(np.zeros((0, 3))))
    assert U.shape == (0, 0) and S.shape == (0,) and Vh.shape == (3, 3)
    close(Vh, np.eye(3))
    U, S, Vh = LA.svd(T(np.zeros((0, 3))), full_matrices=False)
    assert U.shape == (0, 0) and Vh.shape == (0, 3)
    Q, R = LA.qr(T(np.zeros((0, 3))), mode="complete")
    assert Q.shape == (0, 0) and R.shape == (0, 3)
    Q, R = LA.qr(T(np.zeros((3, 0))))
    assert Q.shape == (3, 0) and R.shape == (0, 0)
    assert LA.inv(T(np.zeros((0, 2, 2)))).shape == (0, 2, 2)
    assert LA.eigvalsh(T(np.zeros((0, 3, 3)))).shape == (0, 3)
    assert LA.svdvals(T(np.zeros((0, 3, 2)))).shape == (0, 2)
    assert LA.solve(T(np.zeros((0, 3, 3))), T(np.zeros((0, 3, 1)))).shape == (0, 3, 1)


def test_big_batches_on_threads(ember_threads):
    """Batches big enough to be split over ember's threads (each with its own workspace)."""
    a = rand(48, 20, 20)
    s = a @ mT(a) + 20 * np.eye(20)
    b = rand(48, 20, 2)
    a[5, 0, 0] = np.nan  # a non-finite matrix among finite ones
    with pytest.raises(LA.LinAlgError, match=r"\(Batch element 5\)"):
        LA.svdvals(T(a))
    a[5, 0, 0] = 1.0
    close(LA.svdvals(T(a)), np.linalg.svd(a, compute_uv=False), 1e-9)
    U, S, Vh = LA.svd(T(a))
    close((N(U) * N(S)[..., None, :]) @ N(Vh), a, 1e-9)
    close(LA.eigvalsh(T(s)), np.linalg.eigvalsh(s), 1e-9)
    Q, R = LA.qr(T(a))
    close(N(Q) @ N(R), a, 1e-9)
    close(LA.inv(T(a)), np.linalg.inv(a), 1e-7)
    close(LA.cholesky(T(s)), np.linalg.cholesky(s), 1e-9)
    close(LA.lstsq(T(a), T(b), driver="gelsd").solution, np.linalg.solve(a, b), 1e-7)
    close(LA.solve_triangular(T(s), T(b), upper=True), np.linalg.solve(np.triu(s), b), 1e-9)


def test_non_finite_input():
    a = np.eye(3)
    a[1, 1] = np.nan
    with pytest.raises(LA.LinAlgError, match="linalg.svd: The algorithm failed to converge because the input "
                                             "matrix contained non-finite values"):
        LA.svd(T(a))
    b = np.stack([np.eye(3), np.full((3, 3), np.inf)])
    with pytest.raises(LA.LinAlgError, match=r"\(Batch element 1\).*non-finite"):
        LA.svdvals(T(b))
    w, V = LA.eigh(T(b))  # NaN results for the bad matrix, the good one intact
    close(w[0], np.ones(3))
    assert np.isnan(N(w[1])).all() and np.isnan(N(V[1])).all()
    res = LA.lstsq(T(a), T(np.eye(3)), driver="gelsd")  # gelsd would loop forever on it
    assert np.isnan(N(res.solution)).all()
    with pytest.raises(LA.LinAlgError, match="leading minor of order 2"):
        LA.cholesky(T(a))
    assert math.isnan(float(LA.det(T(a))))


def test_on_cuda_device(cuda):
    """On 'cuda' (the fake backend on a CPU machine) LAPACK runs on host copies; results come back."""
    a, b = well(2, 3, 3), rand(2, 3, 2)
    A, B = T(a).to("cuda"), T(b).to("cuda")
    X = LA.solve(A, B)
    assert X.device.type == "cuda"
    close(X.cpu(), np.linalg.solve(a, b))
    U, S, Vh = LA.svd(A)
    assert U.device.type == S.device.type == Vh.device.type == "cuda"
    close(S.cpu(), np.linalg.svd(a, compute_uv=False))
    close(LA.det(A).cpu(), np.linalg.det(a))
    P, L, Uf = LA.lu(A)
    close((P @ L @ Uf).cpu(), a)


# -- errors ----------------------------------------------------------------------------------------

def test_singular_errors():
    with pytest.raises(LA.LinAlgError, match=r"linalg.inv: The diagonal element 1 is zero"):
        LA.inv(T(np.zeros((3, 3))))
    batch = np.zeros((2, 3, 3))
    batch[0] = np.eye(3)
    with pytest.raises(RuntimeError, match=r"\(Batch element 1\): The diagonal element 1 is zero"):
        LA.inv(T(batch))
    with pytest.raises(LA.LinAlgError, match="The solver failed because the input matrix is singular"):
        LA.solve(T(np.zeros((3, 3))), T(np.zeros(3)))
    with pytest.raises(LA.LinAlgError, match=r"linalg.cholesky: The factorization could not be completed because "
                                             r"the input is not positive-definite \(the leading minor of order 1"):
        LA.cholesky(T(-np.eye(3)))
    with pytest.raises(LA.LinAlgError, match=r"\(Batch element 1\).*leading minor of order 2"):
        LA.cholesky(T(np.stack([np.eye(3), np.diag([1.0, -1.0, 1.0])])))
    with pytest.raises(RuntimeError, match=r"U\[1,1\] is zero"):
        LA.lu_factor(T(np.zeros((3, 3))))
    with pytest.raises(LA.LinAlgError):
        LA.matrix_power(T(np.zeros((3, 3))), -1)
    _, info = LA.cholesky_ex(T(-np.eye(2)))
    assert int(info) == 1
    with pytest.raises(LA.LinAlgError):
        LA.cholesky_ex(T(-np.eye(2)), check_errors=True)


def test_argument_errors():
    sq = T(np.eye(3))
    with pytest.raises(RuntimeError, match="A must be batches of square matrices, but they are 2 by 3 matrices"):
        LA.inv(T(np.zeros((2, 3))))
    for f in [LA.det, LA.cholesky, LA.eigh, LA.slogdet]:
        with pytest.raises(RuntimeError, match="square matrices"):
            f(T(np.zeros((2, 3))))
    with pytest.raises(NotImplementedError, match="Expected a floating point or complex tensor as input. Got Long"):
        LA.inv(ember.zeros(3, 3, dtype=ember.int64))
    for f in [LA.det, LA.svd, LA.qr]:
        with pytest.raises(NotImplementedError, match="Got Long"):
            f(ember.zeros(3, 3, dtype=ember.int64))
    with pytest.raises(RuntimeError, match="must have at least 2 dimensions"):
        LA.svd(T(np.zeros(3)))
    with pytest.raises(RuntimeError, match=r"Incompatible shapes of A and B for the equation AX = B \(3x3 and 4x1\)"):
        LA.solve(sq, T(np.zeros(4)))
    with pytest.raises(RuntimeError, match="Expected A and B to have the same dtype, but found A of type Float and B "
                                           "of type Double"):
        LA.solve(sq.float(), T(np.zeros(3)))
    with pytest.raises(RuntimeError, match="unrecognized mode 'x'"):
        LA.qr(sq, mode="x")
    with pytest.raises(RuntimeError, match="Expected UPLO argument to be 'L' or 'U', but got X"):
        LA.eigh(sq, UPLO="X")
    with pytest.raises(RuntimeError, match="driver"):
        LA.lstsq(sq, sq, driver="x")
    with pytest.raises(RuntimeError, match=r"input.size\(-2\) should match other.size\(-2\)"):
        LA.lstsq(T(np.zeros((3, 2))), T(np.zeros((4, 1))))
    with pytest.raises(TypeError):
        LA.solve_triangular(sq, sq)  # upper is required
    with pytest.raises(RuntimeError, match="multi_dot"):
        LA.multi_dot([sq])
    with pytest.raises(RuntimeError, match="must have length 3"):
        LA.cross(T(np.zeros(2)), T(np.zeros(2)))
    with pytest.raises(TypeError):
        LA.inv([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(RuntimeError, match="deprecated"):
        ember.cholesky(sq)
    with pytest.raises(RuntimeError, match=r"input.dim\(\) must be greater or equal to other.dim\(\)"):
        LA.lstsq(sq, T(np.zeros((2, 3, 1))))


# -- gradients against finite differences (float64) ----------------------------------------------

def test_grad_inv_det_slogdet_solve():
    a, b = well(2, 3, 3), rand(2, 3, 2)
    w = rand(2, 3, 3)
    check_grad(lambda A: (LA.inv(A) * T(w)).sum(), a)
    check_grad(lambda A: LA.det(A).sum(), a)
    check_grad(lambda A: LA.slogdet(A).logabsdet.sum(), a)
    check_grad(lambda A: (LA.solve(A, T(b)) * T(b)).sum(), a)
    check_grad(lambda B: (LA.solve(T(a), B) ** 2).sum(), b)
    check_grad(lambda A: ember.logdet(A @ A.mT).sum(), a)


def test_grad_det_singular():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])  # rank 2
    check_grad(lambda A: LA.det(A), a)


def test_grad_cholesky_qr():
    x = rand(4, 4)
    w = rand(4, 4)
    check_grad(lambda X: (LA.cholesky(X @ X.mT + 4 * ember.eye(4, dtype=ember.float64)) * T(w)).sum(), x)
    check_grad(lambda X: (LA.cholesky(X @ X.mT + 4 * ember.eye(4, dtype=ember.float64), upper=True)
                          * T(w)).sum(), x)
    for shape in [(5, 3), (4, 4), (3, 5)]:
        a = rand(*shape)
        k = min(shape)
        wq, wr = rand(shape[0], k), rand(k, shape[1])
        check_grad(lambda A: (LA.qr(A).Q * T(wq)).sum() + (LA.qr(A).R * T(wr)).sum(), a)


def test_grad_svd_eigh():
    for shape in [(5, 3), (3, 3), (3, 5), (2, 4, 3)]:
        a = rand(*shape)
        k = min(shape[-2:])
        wu = rand(*shape[:-1], k)
        wv = rand(*shape[:-2], k, shape[-1])
        ws = rand(*shape[:-2], k)
        # |U|, |Vh| weighted: invariant to each singular pair's sign
        check_grad(lambda A: (LA.svd(A, full_matrices=False).U ** 2 * T(wu)).sum()
                   + (LA.svd(A, full_matrices=False).Vh ** 2 * T(wv)).sum()
                   + (LA.svd(A, full_matrices=False).S * T(ws)).sum(), a)
        check_grad(lambda A: (LA.svdvals(A) * T(ws)).sum(), a)
    x = rand(4, 4)
    wv, wl = rand(4, 4), rand(4)
    sym = lambda X: X + X.mT  # noqa: E731
    check_grad(lambda X: (LA.eigh(sym(X)).eigenvectors ** 2 * T(wv)).sum()
               + (LA.eigh(sym(X)).eigenvalues * T(wl)).sum(), x)
    check_grad(lambda X: (LA.eigvalsh(sym(X)) * T(wl)).sum(), x)


def test_grad_triangular_lu_solve_lstsq_pinv_exp():
    a, b = well(2, 3, 3), rand(2, 3, 2)
    w = rand(2, 3, 2)
    for upper in (True, False):
        for unit in (True, False):
            check_grad(lambda A: (LA.solve_triangular(A, T(b), upper=upper, unitriangular=unit) * T(w)).sum(), a)
    check_grad(lambda B: (LA.solve_triangular(T(a), B, upper=True) * T(w)).sum(), b)
    c = rand(2, 2, 3)
    check_grad(lambda A: (LA.solve_triangular(A, T(c), upper=False, left=False) * T(c)).sum(), a)
    LU, piv = LA.lu_factor(T(a))
    check_grad(lambda A: (LA.lu_factor(A).LU * T(a)).sum(), a)
    check_grad(lambda A: (LA.lu(A).L * T(a)).sum() + (LA.lu(A).U * T(a[::-1].copy())).sum(), a)
    check_grad(lambda A: (LA.lu_solve(*LA.lu_factor(A), T(b)) * T(w)).sum(), a)
    for shape in [(5, 3), (3, 5), (2, 4, 2)]:  # tall and wide
        x = rand(*shape)
        wl = rand(*shape)
        check_grad(lambda A: (LA.lu_factor(A).LU * T(wl)).sum(), x)
    check_grad(lambda B: (LA.lu_solve(LU, piv, B) * T(w)).sum(), b)
    check_grad(lambda M: (LA.lu_solve(M, piv, T(b)) * T(w)).sum(), N(LU))
    m, y, wy = rand(5, 3), rand(5, 2), rand(3, 2)
    check_grad(lambda A: (LA.lstsq(A, T(y)).solution * T(wy)).sum(), m)
    check_grad(lambda A: (LA.pinv(A) * T(w[0])).sum(), rand(2, 3))
    check_grad(lambda A: (LA.matrix_exp(A) * T(a[0])).sum(), rand(3, 3))
    check_grad(lambda A: (LA.matrix_exp(A) * T(a[0])).sum(), 4 * rand(3, 3))  # with squarings
    check_grad(lambda A: (ember.cholesky_inverse(LA.cholesky(A @ A.mT + 3 * ember.eye(3, dtype=ember.float64)))
                          * T(a[0])).sum(), rand(3, 3))
    check_grad(lambda A: LA.matrix_norm(A, "nuc") + LA.matrix_norm(A, 2), rand(4, 3))


def test_double_backward_inv():
    a = well(3, 3)
    A = T(a, True)
    (g,) = ember.autograd.grad(LA.inv(A).sum(), A, create_graph=True)
    g.sum().backward()
    # d/dA sum(-(A^-T 1 1^T A^-T)): finite differences of the first gradient's sum
    ones = np.ones((3, 3))

    def first(x):
        ai = np.linalg.inv(x)
        return (-(ai.T @ ones @ ai.T)).sum()
    want = np.zeros_like(a)
    for i in range(3):
        for j in range(3):
            e = np.zeros_like(a)
            e[i, j] = 1e-6
            want[i, j] = (first(a + e) - first(a - e)) / 2e-6
    close(A.grad, want, 1e-6)


@pytest.mark.parametrize("name", ["det", "slogdet", "solve", "cholesky", "qr", "svdvals", "eigvalsh", "tri"])
def test_double_backward(name):
    """create_graph=True: the first gradient's own gradient against finite
    differences of that first gradient (itself checked above)."""
    a = well(3, 3)
    w = rand(3, 3)
    funcs = {
        "det": lambda A: LA.det(A),
        "slogdet": lambda A: LA.slogdet(A).logabsdet,
        "solve": lambda A: (LA.solve(A, T(w)) * T(w)).sum(),
        "cholesky": lambda A: (LA.cholesky(A @ A.mT) * T(w)).sum(),
        "qr": lambda A: (LA.qr(A).R * T(w)).sum(),
        "svdvals": lambda A: (LA.svdvals(A) * T(w[0])).sum(),
        "eigvalsh": lambda A: (LA.eigvalsh(A + A.mT) * T(w[0])).sum(),
        "tri": lambda A: (LA.solve_triangular(A, T(w), upper=True) * T(w)).sum(),
    }
    f = funcs[name]

    def first(x):  # <grad f(x), w>
        X = T(x, True)
        (g,) = ember.autograd.grad(f(X), X)
        return float((g * T(w)).sum())

    X = T(a, True)
    (g,) = ember.autograd.grad(f(X), X, create_graph=True)
    (g * T(w)).sum().backward()
    want = np.zeros_like(a)
    for i in range(3):
        for j in range(3):
            e = np.zeros_like(a)
            e[i, j] = 1e-5
            want[i, j] = (first(a + e) - first(a - e)) / 2e-5
    close(X.grad, want, 1e-5)


# -- against torch ---------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("name", ["inv", "det", "logabsdet", "cholesky", "qr", "svd", "eigh", "eigvalsh",
                                  "svdvals", "solve", "solve_triangular", "pinv", "matrix_exp", "lstsq",
                                  "lu_factor", "lu", "householder", "lu_tall", "lu_wide"])
def test_grads_match_torch(name):
    a = rand(2, 4, 4)
    x = a.copy()
    b = rand(2, 4, 2)
    w = rand(2, 4, 4)

    def run(lib, X):
        L = lib.linalg
        if name == "inv":
            return L.inv(X + 3 * lib.eye(4, dtype=X.dtype))
        if name == "det":
            return L.det(X)
        if name == "logabsdet":
            return L.slogdet(X)[1]
        if name == "cholesky":
            return L.cholesky(X @ X.mT + lib.eye(4, dtype=X.dtype))
        if name == "qr":
            Q, R = L.qr(X)
            return Q.sum(-1) + R.sum(-2)
        if name == "svd":
            U, S, Vh = L.svd(X, full_matrices=False)
            return (U ** 2).sum(-1) + S + (Vh ** 2).sum(-2)
        if name == "eigh":
            w_, V = L.eigh(X)
            return w_ + (V ** 2).sum(-2)
        if name == "eigvalsh":
            return L.eigvalsh(X, UPLO="U")
        if name == "svdvals":
            return L.svdvals(X)
        if name == "solve":
            return L.solve(X, lib.from_numpy(b))
        if name == "solve_triangular":
            return L.solve_triangular(X + 3 * lib.eye(4, dtype=X.dtype), lib.from_numpy(b), upper=False)
        if name == "pinv":
            return L.pinv(X[..., :3])
        if name == "matrix_exp":
            return L.matrix_exp(X)
        if name == "lstsq":
            return L.lstsq(X[..., :3], lib.from_numpy(b)).solution
        if name == "lu_factor":
            return L.lu_factor(X).LU
        if name == "lu":
            P, Lo, U = L.lu(X)
            return Lo + U
        if name in ("lu_tall", "lu_wide"):
            P, Lo, U = L.lu(X[..., :3] if name == "lu_tall" else X[..., :3, :])
            return lib.cat([Lo.sum(-1), U.sum(-2)], -1)
        if name == "householder":
            return L.householder_product(X, X[..., 0, :3] / 4)

    te = T(x, True)
    tt = torch.from_numpy(x.copy()).requires_grad_(True)
    re, rt = run(ember, te), run(torch, tt)
    close(re, rt.detach().numpy(), 1e-9)
    g = rand(*rt.shape)
    re.backward(T(g))
    rt.backward(torch.from_numpy(g))
    close(te.grad, tt.grad.numpy(), 1e-8)
    del w


@needs_torch
def test_values_match_torch():
    a = rand(3, 4, 4)
    b = rand(3, 4, 2)
    s = spd(3, 4)
    tA, eA = torch.from_numpy(a), T(a)
    for drv in ["gels", "gelsy", "gelsd", "gelss"]:
        m = rand(6, 3)
        y = rand(6, 2)
        r_t = torch.linalg.lstsq(torch.from_numpy(m), torch.from_numpy(y), driver=drv)
        r_e = LA.lstsq(T(m), T(y), driver=drv)
        for f in range(4):
            close(r_e[f], r_t[f].numpy(), 1e-9)
            assert r_e[f].dtype == getattr(ember, str(r_t[f].dtype).split(".")[-1])
    r_t = torch.linalg.lstsq(torch.from_numpy(a), torch.from_numpy(b))
    r_e = LA.lstsq(eA, T(b))
    for f in range(4):
        close(r_e[f], r_t[f].numpy(), 1e-8)
    LU_t, piv_t = torch.linalg.lu_factor(tA)
    LU_e, piv_e = LA.lu_factor(eA)
    close(LU_e, LU_t.numpy())
    assert piv_e.tolist() == piv_t.tolist()
    close(LA.matrix_exp(eA), torch.linalg.matrix_exp(tA).numpy(), 1e-9)
    close(LA.cond(eA), torch.linalg.cond(tA).numpy(), 1e-8)
    close(LA.matrix_rank(eA), torch.linalg.matrix_rank(tA).numpy(), 0)
    close(LA.pinv(T(s), hermitian=True), torch.linalg.pinv(torch.from_numpy(s), hermitian=True).numpy(), 1e-9)
    close(ember.cholesky_inverse(LA.cholesky(T(s))),
          torch.cholesky_inverse(torch.linalg.cholesky(torch.from_numpy(s))).numpy(), 1e-9)
    h, tau = torch.geqrf(tA)
    close(LA.householder_product(T(h.numpy()), T(tau.numpy())),
          torch.linalg.householder_product(h, tau).numpy(), 1e-10)
    Qe, Re = LA.qr(eA)
    Qt, Rt = torch.linalg.qr(tA)
    close(Qe, Qt.numpy(), 1e-9)  # both from geqrf/orgqr: the same signs
    close(Re, Rt.numpy(), 1e-9)
    close(ember.slogdet(eA).logabsdet, torch.slogdet(tA).logabsdet.numpy(), 1e-10)
    assert type(ember.slogdet(eA)).__name__ == type(torch.slogdet(tA)).__name__
    for f in ["inv_ex", "solve_ex", "cholesky_ex", "lu_factor_ex", "eigh", "lstsq", "lu", "slogdet", "qr", "svd"]:
        args = (tA, torch.from_numpy(b)) if f in ("solve_ex", "lstsq") else \
            (torch.from_numpy(s),) if f in ("cholesky_ex", "eigh") else (tA,)
        want = getattr(torch.linalg, f)(*args)
        got = getattr(LA, f)(*(T(x.numpy()) for x in args))
        assert type(got).__name__ == type(want).__name__ and got._fields == type(want).__match_args__, f


@needs_torch
def test_errors_match_torch():
    cases = [
        lambda L, t: L.linalg.inv(t.zeros(3, 3)),
        lambda L, t: L.linalg.cholesky(-t.eye(3)),
        lambda L, t: L.linalg.solve(t.zeros(2, 3, 3), t.zeros(2, 3)),
        lambda L, t: L.linalg.inv(t.zeros(2, 3)),
        lambda L, t: L.linalg.det(t.zeros(3, 3, dtype=L.int64)),
        lambda L, t: L.linalg.svd(t.zeros(3)),
        lambda L, t: L.linalg.lu_factor(t.zeros(3, 3)),
        lambda L, t: L.linalg.eigh(t.eye(2), UPLO="X"),
        lambda L, t: L.linalg.inv(t.eye(2, dtype=L.float16)),
        lambda L, t: L.linalg.matrix_power(t.zeros(2, 3), 2),
        lambda L, t: L.qr(t.eye(2), some=False),
        lambda L, t: L.linalg.lstsq(t.zeros(3, 3, dtype=L.int64), t.zeros(3, 1, dtype=L.int64)),
        lambda L, t: L.linalg.lstsq(t.zeros(3, 2), t.zeros(3, 1, dtype=L.float64)),
        lambda L, t: L.linalg.matrix_rank(t.zeros(3, 3, dtype=L.int64)),
        lambda L, t: L.linalg.cond(t.zeros(3, 3), "x"),
        lambda L, t: L.linalg.cond(t.zeros(2, 3), "fro"),
        lambda L, t: L.linalg.solve(t.eye(3), t.zeros(2, 3, 1), left=False),
        lambda L, t: L.linalg.lu_solve(*L.linalg.lu_factor(t.eye(3)), t.zeros(3, 1, dtype=L.float64)),
        lambda L, t: L.linalg.lu_factor(t.zeros(3)),
        lambda L, t: L.linalg.multi_dot([t.zeros(2, 3), t.zeros(4, 2)]),
        lambda L, t: L.cholesky_solve(t.zeros(3, 1), t.zeros(2, 2)),
        lambda L, t: L.linalg.inv(1.0),
        lambda L, t: L.linalg.householder_product(t.zeros(2, 3), t.zeros(2)),
        lambda L, t: L.linalg.cross(t.zeros(4, 3), t.zeros(2, 3)),
        lambda L, t: L.linalg.svd(t.full((2, 2), math.nan)),
    ]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(torch, torch)
        with pytest.raises(Exception) as got:
            case(ember, ember)
        assert type(got.value).__name__ == type(want.value).__name__.replace("_LinAlgError", "LinAlgError")
        assert isinstance(got.value, RuntimeError) == isinstance(want.value, RuntimeError)
        assert isinstance(got.value, NotImplementedError) == isinstance(want.value, NotImplementedError)
        assert isinstance(got.value, LA.LinAlgError) == isinstance(want.value, torch.linalg.LinAlgError)
        assert str(got.value).replace("torch.", "") == str(want.value).replace("torch.", ""), \
            (str(got.value), str(want.value))


@pytest.mark.skipif(HAS_LAPACK, reason="this build has LAPACK")
def test_no_lapack():
    with pytest.raises(RuntimeError, match="ember was built without LAPACK"):
        LA.inv(ember.eye(2))
