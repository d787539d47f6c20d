"""Complex inputs beyond arithmetic: the unary functions C99's c* routines
give (inverse trig and hyperbolic, sigmoid, sgn, log2/log10/log1p, expm1,
exp2), norms of complex tensors, complex linear algebra (solve, inv, det,
slogdet, cholesky, qr, svd, eigh) and the general eigendecomposition
(linalg.eig / eigvals, complex results for real input too), each against
NumPy, with gradcheck on complex inputs where ember has the formula; and the
LLaMA rotary embedding in its complex form (freqs_cis = polar(1, t f),
view_as_complex, multiply, view_as_real) against the real cos/sin form."""
import numpy as np
import pytest

import ember
from ember.autograd import gradcheck

C64, C128 = ember.complex64, ember.complex128


def rnd(shape, dtype=np.complex128, seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal(shape) + 1j * r.standard_normal(shape)).astype(dtype)


def close(t, a, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(t.detach().numpy(), a, rtol=rtol, atol=atol)


# ----------------------------------------------------------- unary functions

def _np_sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _np_sgn(z):
    a = np.abs(z)
    return np.where(a == 0, 0, z / np.where(a == 0, 1, a))


UNARY = {
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "sigmoid": _np_sigmoid, "sgn": _np_sgn, "log2": np.log2, "log10": np.log10,
    "log1p": np.log1p, "expm1": np.expm1, "exp2": np.exp2,
}


def _points(dtype):
    # random points, points on and near the axes (branch cuts of the inverse functions lie there), tiny ones
    z = rnd(40, seed=3) * 2
    extra = np.array([0, 1e-9 + 1e-9j, -1e-7j, 0.5, -0.5, 2.0, -2.0, 3j, -3j, 1 + 0j, -1 + 0j, 1e-3 - 2e-3j])
    return np.concatenate([z, extra]).astype(dtype)


@pytest.mark.parametrize("dt,npdt,tol", [(C64, np.complex64, 2e-6), (C128, np.complex128, 1e-12)])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_against_numpy(name, dt, npdt, tol):
    z = _points(npdt)
    with np.errstate(divide="ignore", invalid="ignore"):  # the poles give NumPy's inf as ember's
        ref = UNARY[name](z.astype(np.complex128))
    r = getattr(ember, name)(ember.tensor(z))
    assert r.dtype == dt
    np.testing.assert_allclose(r.numpy(), ref.astype(npdt), rtol=tol, atol=tol)
    m = getattr(ember.tensor(z), name)()  # the method spelling
    np.testing.assert_allclose(m.numpy(), r.numpy(), rtol=0, atol=0)


def test_unary_special_values():
    # C99 Annex G values, as torch gives them
    nan, inf = float("nan"), float("inf")
    z = ember.tensor([complex(inf, 0), complex(0, inf), complex(nan, 0)], dtype=C128)
    r = ember.asinh(z).numpy()
    assert r[0] == complex(inf, 0) and r[1].real == inf and abs(r[1].imag - np.pi / 2) < 1e-15
    assert np.isnan(r[2].real)
    assert ember.sgn(ember.tensor([0j, 3 + 4j], dtype=C128)).tolist() == [0j, (3 + 4j) / 5]


def test_expm1_log1p_small_arguments():
    z = np.array([1e-10 + 1e-10j, -3e-12 + 2e-12j])
    close(ember.expm1(ember.tensor(z)), z + z * z / 2, rtol=1e-9, atol=0)
    close(ember.log1p(ember.tensor(z)), z - z * z / 2, rtol=1e-9, atol=0)


def test_sign_refuses_complex_as_torch():
    with pytest.raises(RuntimeError, match="Please use torch.sgn instead"):
        ember.sign(ember.tensor([1 + 1j]))
    assert ember.sgn(ember.tensor([-2.0, 0.0, 3.0])).tolist() == [-1.0, 0.0, 1.0]


GRAD_UNARY = ["asin", "acos", "atan", "asinh", "acosh", "atanh", "sigmoid", "sgn", "log2", "log10", "log1p",
              "expm1", "exp2"]


@pytest.mark.parametrize("name", GRAD_UNARY)
def test_gradcheck_unary(name):
    # points off the branch cuts (real axis beyond +-1, imaginary axis beyond +-i)
    z = ember.tensor(rnd(4, seed=9) * 0.6 + (0.3 + 0.4j), requires_grad=True)
    assert gradcheck(getattr(ember, name), (z,), eps=1e-6, atol=1e-5)


def test_acosh_gradient_left_half_plane():
    # acosh's derivative is 1/(sqrt(z-1) sqrt(z+1)), not 1/sqrt(z^2-1): they differ for Re z < 0
    z = ember.tensor([-0.7 + 0.6j, -2.0 - 0.5j], dtype=C128, requires_grad=True)
    assert gradcheck(ember.acosh, (z,), eps=1e-6, atol=1e-5)


def test_sgn_gradient_hand_computed():
    # |z| = 5, s = (3+4i)/5; for L = Re(sgn z): g = 1, grad = (1 - s^2) / 10
    z = ember.tensor([3 + 4j], requires_grad=True)
    ember.sgn(z).real.sum().backward()
    s = (3 + 4j) / 5
    close(z.grad, np.array([(1 - s * s) / 10]), rtol=1e-12)
    w = ember.tensor([0j], requires_grad=True)
    ember.sgn(w).real.sum().backward()
    assert w.grad.tolist() == [0j]


# ------------------------------------------------------------------- norms

@pytest.mark.parametrize("dt,npdt,rdt", [(C64, np.complex64, ember.float32), (C128, np.complex128, ember.float64)])
def test_norms_of_complex(dt, npdt, rdt):
    z = rnd((3, 5), npdt, seed=4)
    t = ember.tensor(z)
    for ordv in [2, 1, 3, 0.5, float("inf"), -float("inf"), 0]:
        r = ember.linalg.vector_norm(t, ordv)
        assert r.dtype == rdt
        ref = np.linalg.norm(z.reshape(-1), ordv) if ordv not in (0,) else np.count_nonzero(z)
        np.testing.assert_allclose(r.numpy(), ref, rtol=2e-5)
    close(ember.linalg.vector_norm(t, 2, dim=1, keepdim=True), np.linalg.norm(z, axis=1, keepdims=True), 2e-5)
    close(ember.norm(t), np.linalg.norm(z), 2e-5)
    close(ember.norm(t, 1, dim=0), np.abs(z).sum(0), 2e-5)
    close(t.norm(), np.linalg.norm(z), 2e-5)
    close(ember.linalg.norm(t), np.linalg.norm(z), 2e-5)
    close(ember.linalg.matrix_norm(t), np.linalg.norm(z, "fro"), 2e-5)
    assert ember.linalg.vector_norm(ember.tensor(z.astype(np.complex64)), dtype=C128).dtype == ember.float64


@pytest.mark.parametrize("ordv", [2, 1, 3, 1.5, float("inf")])
def test_gradcheck_norm_complex(ordv):
    z = ember.tensor(rnd((2, 3), seed=5), requires_grad=True)
    assert gradcheck(lambda x: ember.linalg.vector_norm(x, ordv), (z,))
    assert gradcheck(lambda x: ember.norm(x, ordv, dim=1), (z,))


# ---------------------------------------------------------- linear algebra

DTS = [(C64, np.complex64, 1e-4), (C128, np.complex128, 1e-10)]


def _well_conditioned(n, npdt, seed, batch=()):
    return (rnd(batch + (n, n), seed=seed) + 3 * np.eye(n)).astype(npdt)


def _hermitian_pd(n, npdt, seed, batch=()):
    a = rnd(batch + (n, n), seed=seed)
    return (a @ np.swapaxes(a.conj(), -1, -2) + n * np.eye(n)).astype(npdt)


@pytest.mark.parametrize("dt,npdt,tol", DTS)
def test_solve_inv_det(dt, npdt, tol):
    A = _well_conditioned(4, npdt, 1, (2,))
    B = rnd((2, 4, 3), npdt, seed=2)
    At, Bt = ember.tensor(A), ember.tensor(B)
    X = ember.linalg.solve(At, Bt)
    assert X.dtype == dt
    close(X, np.linalg.solve(A, B), tol, tol)
    close(ember.linalg.solve(At, Bt[..., 0]), np.linalg.solve(A, B[..., :1])[..., 0], tol, tol)
    close(ember.linalg.solve(At, Bt.mT, left=False), np.swapaxes(np.linalg.solve(np.swapaxes(A, -1, -2),
                                                                                   B), -1, -2), tol, tol)
    close(ember.linalg.inv(At), np.linalg.inv(A), tol, tol)
    close(ember.inverse(At), np.linalg.inv(A), tol, tol)
    d = ember.linalg.det(At)
    assert d.dtype == dt
    close(d, np.linalg.det(A), tol * 10, tol)
    close(At.det(), np.linalg.det(A), tol * 10, tol)
    sign, logabs = ember.linalg.slogdet(At)
    rs, rl = np.linalg.slogdet(A)
    assert sign.dtype == dt and logabs.dtype == (ember.float32 if dt == C64 else ember.float64)
    close(sign, rs, tol * 10, tol)
    close(logabs, rl, tol * 10, tol)


def test_pinv_rank_matrix_norms_exp_lu_solve():
    A = rnd((2, 4, 3), seed=21)
    At = ember.tensor(A)
    close(ember.linalg.pinv(At), np.linalg.pinv(A), 1e-10, 1e-10)
    H = _hermitian_pd(3, np.complex128, 22)
    close(ember.linalg.pinv(ember.tensor(H), hermitian=True), np.linalg.inv(H), 1e-10, 1e-10)
    low = A[0] @ rnd((3, 3), seed=23)[:, :1] @ rnd((1, 3), seed=24)   # rank 1
    assert ember.linalg.matrix_rank(ember.tensor(low)).item() == 1
    assert ember.linalg.matrix_rank(At).tolist() == [3, 3]
    for ordv in ["fro", "nuc", 2, -2, 1, -1, float("inf"), -float("inf")]:
        r = ember.linalg.matrix_norm(At, ordv)
        assert r.dtype == ember.float64
        close(r, np.linalg.norm(A, ordv, axis=(-2, -1)), 1e-10, 1e-10)
    # matrix_exp against the eigendecomposition (NumPy's): V e^w V^-1
    M = rnd((3, 3), seed=25) * 0.7
    w, V = np.linalg.eig(M)
    close(ember.linalg.matrix_exp(ember.tensor(M)), V @ np.diag(np.exp(w)) @ np.linalg.inv(V), 1e-9, 1e-9)
    # lu_solve: adjoint is the conjugate transpose; left=False solves X A = B
    S = _well_conditioned(3, np.complex128, 26)
    B = rnd((3, 2), seed=27)
    LU, piv = ember.linalg.lu_factor(ember.tensor(S))
    close(ember.linalg.lu_solve(LU, piv, ember.tensor(B)), np.linalg.solve(S, B), 1e-10, 1e-10)
    close(ember.linalg.lu_solve(LU, piv, ember.tensor(B), adjoint=True), np.linalg.solve(S.conj().T, B), 1e-10, 1e-10)
    close(ember.linalg.lu_solve(LU, piv, ember.tensor(B.T), left=False), B.T @ np.linalg.inv(S), 1e-10, 1e-10)
    close(ember.linalg.lu_solve(LU, piv, ember.tensor(B.T), left=False, adjoint=True),
          B.T @ np.linalg.inv(S.conj().T), 1e-10, 1e-10)


@pytest.mark.parametrize("dt,npdt,tol", DTS)
def test_lstsq_complex(dt, npdt, tol):
    A = rnd((2, 5, 3), npdt, seed=31)
    B = rnd((2, 5, 2), npdt, seed=32)
    X, res, rank, sv = ember.linalg.lstsq(ember.tensor(A), ember.tensor(B), driver="gelsd")
    rdt = ember.float32 if dt == C64 else ember.float64
    assert X.dtype == dt and res.dtype == rdt and sv.dtype == rdt
    ref = np.stack([np.linalg.lstsq(A[i], B[i], rcond=None)[0] for i in range(2)])
    close(X, ref, tol * 100, tol * 100)
    close(res, (np.abs(A @ ref - B) ** 2).sum(-2), tol * 100, tol * 100)
    assert rank.tolist() == [3, 3]
    close(sv, np.linalg.svd(A, compute_uv=False), tol * 10, tol * 10)
    assert ember.linalg.lstsq(ember.tensor(A), ember.tensor(B)).residuals.dtype == rdt


def test_gradcheck_complex_pinv_lstsq_matrix_functions():
    A = ember.tensor(rnd((4, 3), seed=33), requires_grad=True)
    B = ember.tensor(rnd((4, 2), seed=34), requires_grad=True)
    H = ember.tensor(rnd((3, 3), seed=35), requires_grad=True)
    assert gradcheck(ember.linalg.pinv, (A,))
    assert gradcheck(lambda a, b: ember.linalg.lstsq(a, b).solution, (A, B))
    assert gradcheck(lambda h: ember.linalg.matrix_exp(h * 0.5), (H,))
    assert gradcheck(lambda h: ember.linalg.matrix_norm(h, "nuc"), (H,))
    assert gradcheck(lambda h: ember.linalg.pinv((h + h.mH) / 2, hermitian=True), (H,))


def test_solve_singular_complex_raises():
    A = ember.tensor([[1 + 1j, 2 + 2j], [1 + 1j, 2 + 2j]])
    with pytest.raises(ember.linalg.LinAlgError, match="singular"):
        ember.linalg.solve(A, ember.ones(2, 1, dtype=C64))
    assert abs(ember.linalg.det(A).item()) < 1e-6


def test_gradcheck_complex_solve_inv_det():
    A = ember.tensor(_well_conditioned(3, np.complex128, 6), requires_grad=True)
    B = ember.tensor(rnd((3, 2), seed=7), requires_grad=True)
    assert gradcheck(ember.linalg.solve, (A, B))
    assert gradcheck(ember.linalg.inv, (A,))
    assert gradcheck(ember.linalg.det, (A,))
    assert gradcheck(lambda a: ember.linalg.slogdet(a)[1], (A,))
    assert gradcheck(lambda a: ember.linalg.slogdet(a)[0], (A,))  # the phase of det is differentiable
    assert gradcheck(lambda a: ember.linalg.slogdet(a), (A,))
    assert gradcheck(lambda a, b: ember.linalg.solve_triangular(a.triu(), b, upper=True), (A, B))
    # a real matrix with a complex right-hand side (the promotion is the caller's)
    Ar = ember.tensor(_well_conditioned(3, np.complex128, 8).real, requires_grad=True)
    assert gradcheck(lambda a, b: ember.linalg.solve(a.to(C128), b), (Ar, B))


@pytest.mark.parametrize("dt,npdt,tol", DTS)
def test_cholesky_qr_svd_eigh(dt, npdt, tol):
    rdt = ember.float32 if dt == C64 else ember.float64
    H = _hermitian_pd(4, npdt, 3, (2,))
    L = ember.linalg.cholesky(ember.tensor(H))
    close(L, np.linalg.cholesky(H), tol * 10, tol * 10)
    U = ember.linalg.cholesky(ember.tensor(H), upper=True)
    close(U.mH @ U, H, tol * 10, tol * 10)
    close(ember.cholesky_solve(ember.tensor(H[:, :, :2]), L), np.linalg.solve(H, H[:, :, :2]), tol * 10, tol * 10)

    A = rnd((2, 5, 3), npdt, seed=4)
    Q, R = ember.linalg.qr(ember.tensor(A))
    assert Q.dtype == dt and tuple(Q.shape) == (2, 5, 3)
    close(Q @ R, A, tol * 10, tol * 10)
    close(Q.mH @ Q, np.broadcast_to(np.eye(3), (2, 3, 3)), tol * 10, tol * 10)
    assert np.allclose(np.tril(R.numpy(), -1), 0)

    Us, S, Vh = ember.linalg.svd(ember.tensor(A), full_matrices=False)
    assert S.dtype == rdt and Us.dtype == dt
    close(S, np.linalg.svd(A, compute_uv=False), tol * 10, tol * 10)
    close((Us * S.to(dt).unsqueeze(-2)) @ Vh, A, tol * 10, tol * 10)
    close(ember.linalg.svdvals(ember.tensor(A)), np.linalg.svd(A, compute_uv=False), tol * 10, tol * 10)

    w, V = ember.linalg.eigh(ember.tensor(H))
    assert w.dtype == rdt and V.dtype == dt
    close(w, np.linalg.eigvalsh(H), tol * 10, tol * 100)
    close(ember.tensor(H) @ V, (V * w.to(dt).unsqueeze(-2)).numpy(), tol * 100, tol * 100)
    close(ember.linalg.eigvalsh(ember.tensor(H), UPLO="U"), np.linalg.eigvalsh(H, UPLO="U"), tol * 10, tol * 100)


def test_gradcheck_complex_cholesky_and_eigvalsh():
    H0 = _hermitian_pd(3, np.complex128, 11)
    A = ember.tensor(H0, requires_grad=True)

    def herm(a):
        return (a + a.mH) / 2
    assert gradcheck(lambda a: ember.linalg.cholesky(herm(a)), (A,))
    assert gradcheck(lambda a: ember.linalg.eigvalsh(herm(a)), (A,))
    B = ember.tensor(rnd((3, 2), seed=3))
    assert gradcheck(lambda a: ember.linalg.svdvals(a @ B), (A,))


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4)])
def test_gradcheck_complex_qr_svd(shape):
    A = ember.tensor(rnd(shape, seed=14), requires_grad=True)
    assert gradcheck(ember.linalg.qr, (A,))

    def svd(a):
        return ember.linalg.svd(a, full_matrices=False)
    # losses that do not depend on the phase each pair (u_i, v_i) may take
    assert gradcheck(lambda a: (lambda U, S, Vh: U @ Vh)(*svd(a)), (A,))
    assert gradcheck(lambda a: (lambda U, S, Vh: (U * S.to(U.dtype).unsqueeze(-2)) @ Vh)(*svd(a)), (A,))
    assert gradcheck(lambda a: svd(a)[0].abs() ** 2, (A,))
    assert gradcheck(lambda a: svd(a)[1], (A,))


def test_gradcheck_complex_eigh_vectors():
    A = ember.tensor(rnd((3, 3), seed=15), requires_grad=True)

    def herm(a):
        return (a + a.mH) / 2
    assert gradcheck(lambda a: ember.linalg.eigh(herm(a))[1].abs() ** 2, (A,))
    assert gradcheck(lambda a: (lambda w, V: (V * w.to(V.dtype).unsqueeze(-2)) @ V.mH)(*ember.linalg.eigh(herm(a))),
                     (A,))


def test_gradcheck_broadcast_complex_product():
    # the broadcast dim of the gradient is summed away in complex (sum_to_size of a complex tensor)
    a = ember.tensor(rnd((3, 4), seed=16), requires_grad=True)
    w = ember.tensor(rnd((4,), seed=17), requires_grad=True)
    r = ember.tensor(np.random.default_rng(3).standard_normal((3, 1)), requires_grad=True)
    assert gradcheck(lambda a, w, r: a * w * r, (a, w, r))
    g = ember.tensor(rnd((3, 4), seed=18))
    close(g.sum_to_size(1, 4), g.numpy().sum(0, keepdims=True), 1e-12, 1e-12)


# -------------------------------------------------------------------- eig

def _match(w, ref):
    """w's eigenvalues reordered to ref's (nearest-first matching; NumPy's order is LAPACK's too but
    float rounding can swap a conjugate pair)."""
    w, out = list(w), []
    for r in ref:
        i = int(np.argmin([abs(x - r) for x in w]))
        out.append(w.pop(i))
    return np.array(out)


@pytest.mark.parametrize("dt,npdt,cdt,tol", [(ember.float32, np.float32, C64, 1e-4),
                                             (ember.float64, np.float64, C128, 1e-10),
                                             (C64, np.complex64, C64, 1e-4),
                                             (C128, np.complex128, C128, 1e-10)])
def test_eig_against_numpy(dt, npdt, cdt, tol):
    r = np.random.default_rng(12)
    A = r.standard_normal((3, 5, 5)).astype(npdt)
    if np.iscomplexobj(A):
        A = (A + 1j * r.standard_normal((3, 5, 5))).astype(npdt)
    At = ember.tensor(A)
    w, V = ember.linalg.eig(At)
    assert w.dtype == cdt and V.dtype == cdt
    ref = np.linalg.eigvals(A.astype(np.complex128))
    for b in range(3):
        np.testing.assert_allclose(_match(w[b].numpy(), ref[b]), ref[b], rtol=tol * 10, atol=tol * 10)
    Ac = At.to(cdt)
    close(Ac @ V, (V * w.unsqueeze(-2)).numpy(), tol * 10, tol * 10)          # A V = V diag(w)
    close(ember.linalg.vector_norm(V, dim=-2), np.ones((3, 5)), tol, tol)     # unit-norm columns
    w2 = ember.linalg.eigvals(At)
    assert w2.dtype == cdt
    close(w2, w.numpy(), tol, tol)


def test_eig_known_values_and_errors():
    rot = ember.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=ember.float64)  # eigenvalues +-i, no real ones
    w = ember.linalg.eigvals(rot)
    np.testing.assert_allclose(sorted(w.tolist(), key=lambda c: c.imag), [-1j, 1j], atol=1e-15)
    with pytest.raises(RuntimeError, match="square"):
        ember.linalg.eig(ember.ones(2, 3))
    with pytest.raises(RuntimeError, match="infs or NaNs"):
        ember.linalg.eig(ember.tensor([[float("nan"), 0.0], [0.0, 1.0]]))
    with pytest.raises(RuntimeError, match="floating point or complex"):
        ember.linalg.eigvals(ember.ones(2, 2, dtype=ember.int64))
    # real input: LAPACK's real routine gives exact conjugate pairs and real eigenvalues
    w, V = ember.linalg.eig(ember.tensor([[0.0, -1.0], [1.0, 0.0]]))
    assert w.tolist() == [1j, -1j]
    np.testing.assert_allclose(V[:, 0].numpy(), [np.sqrt(0.5), -1j * np.sqrt(0.5)], atol=1e-7)
    assert (V[:, 1].numpy() == V[:, 0].numpy().conj()).all()
    w = ember.linalg.eigvals(ember.tensor([[2.0, 1.0], [0.0, 3.0]], dtype=ember.float64))
    assert sorted(w.tolist(), key=lambda c: c.real) == [2 + 0j, 3 + 0j]
    w, V = ember.linalg.eig(ember.zeros(0, 0))
    assert tuple(w.shape) == (0,) and w.dtype == C64


def test_gradcheck_eigvals_and_gauge_invariant_eig():
    r = np.random.default_rng(2)
    A = ember.tensor(r.standard_normal((4, 4)), requires_grad=True)
    assert gradcheck(ember.linalg.eigvals, (A,))
    Z = ember.tensor(rnd((3, 3), seed=13), requires_grad=True)
    assert gradcheck(ember.linalg.eigvals, (Z,))
    # |V|^2 does not depend on each eigenvector's phase, so it is differentiable
    assert gradcheck(lambda a: ember.linalg.eig(a)[1].abs() ** 2, (Z,))
    assert gradcheck(lambda a: ember.linalg.eig(a)[0], (A,))


# ------------------------------------------------------- rotary embedding

def _freqs(dim, end, theta=10000.0):
    f = 1.0 / (theta ** (ember.arange(0, dim, 2)[: dim // 2].float() / dim))
    t = ember.arange(end).float()
    return ember.outer(t, f)                                   # (end, dim/2)


def _rotary_complex(x, angles):
    # LLaMA's apply_rotary_emb: x's last dim as complex pairs times e^{i angle}
    freqs_cis = ember.polar(ember.ones_like(angles), angles)    # (seq, dim/2)
    xc = ember.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    out = ember.view_as_real(xc * freqs_cis.unsqueeze(0).unsqueeze(2))
    return out.flatten(3).type_as(x)


def _rotary_real(x, angles):
    # the cos/sin form with interleaved pairs: (x0, x1) -> (x0 c - x1 s, x0 s + x1 c)
    c = angles.cos().repeat_interleave(2, -1).unsqueeze(0).unsqueeze(2)
    s = angles.sin().repeat_interleave(2, -1).unsqueeze(0).unsqueeze(2)
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    rot = ember.stack([-pairs[..., 1], pairs[..., 0]], -1).reshape(x.shape)   # rotate-half, interleaved
    return x * c + rot * s


def test_rotary_embedding_complex_equals_cos_sin():
    bsz, seq, heads, dim = 2, 7, 3, 16
    angles = _freqs(dim, seq)
    x = ember.randn(bsz, seq, heads, dim, generator=ember.Generator().manual_seed(0))
    x1 = x.clone().requires_grad_()
    x2 = x.clone().requires_grad_()
    y1, y2 = _rotary_complex(x1, angles), _rotary_real(x2, angles)
    assert y1.dtype == ember.float32 and tuple(y1.shape) == (bsz, seq, heads, dim)
    np.testing.assert_allclose(y1.detach().numpy(), y2.detach().numpy(), rtol=1e-5, atol=1e-5)
    # and an independent reference: NumPy's complex multiply
    xn = x.numpy().reshape(bsz, seq, heads, dim // 2, 2)
    ref = (xn[..., 0] + 1j * xn[..., 1]) * np.exp(1j * angles.numpy())[None, :, None, :]
    np.testing.assert_allclose(y1.detach().numpy(), np.stack([ref.real, ref.imag], -1).reshape(x.shape),
                               rtol=1e-5, atol=1e-5)
    g = ember.randn(bsz, seq, heads, dim, generator=ember.Generator().manual_seed(1))
    (y1 * g).sum().backward()
    (y2 * g).sum().backward()
    np.testing.assert_allclose(x1.grad.numpy(), x2.grad.numpy(), rtol=1e-5, atol=1e-5)
    # the backward of a rotation is the inverse rotation of the gradient
    gn = g.numpy().reshape(bsz, seq, heads, dim // 2, 2)
    back = (gn[..., 0] + 1j * gn[..., 1]) * np.exp(-1j * angles.numpy())[None, :, None, :]
    np.testing.assert_allclose(x1.grad.numpy(), np.stack([back.real, back.imag], -1).reshape(x.shape),
                               rtol=1e-5, atol=1e-5)


def test_gradcheck_rotary_complex_form():
    angles = _freqs(4, 3).double()
    x = ember.randn(1, 3, 2, 4, dtype=ember.float64, requires_grad=True)

    def f(x):
        freqs_cis = ember.polar(ember.ones_like(angles), angles)
        xc = ember.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return ember.view_as_real(xc * freqs_cis.unsqueeze(0).unsqueeze(2)).flatten(3)
    assert gradcheck(f, (x,))
