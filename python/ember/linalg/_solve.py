"""ember.linalg's linear solves: triangular systems (BLAS trsm) and the LU
family (LAPACK getrf / getrs) with what torch builds on them: solve, inv,
lu_factor, lu, lu_unpack, lu_solve, det, slogdet and logdet, each with its
gradient as an autograd Function (conventions: _lapack.py)."""
import math

from .. import _C
from .._autocast_policy import fp32_policy as _fp32_policy
from .._shape_functions import diag_embed as _diag_embed
from ._lapack import (_I32, _I64, _InvEx, _LU, _LUFactor, _LUFactorEx, _LUUnpack, _LinalgSlogdet, _Slogdet,
                      _SolveEx, _TriSolve, _back, _broadcast_batch, _check, _diag, _eye_like, _finish,
                      _finish_tuple, _first_error, _function, _lapack_in, _lazy, _on, _raise_info,
                      _same_dtype, _tensor, _conj)
from ._spectral import _svd_raw


# -- triangular solve (BLAS trsm) ------------------------------------------------------------

def _trsm(A, B, upper, left, unit):
    """op: X with A X = B (left) or X A = B, A triangular; no autograd."""
    a = _lapack_in(A)
    b = _lapack_in(B)
    _C._lapack_trsm(a, b, left, upper, False, unit)
    return _back(b, B)


def _tri_part(G, upper, unit):
    G = _C.triu(G) if upper else _C.tril(G)
    if unit:
        G = G - _diag_embed(_diag(G))
    return G


def _build_solve_triangular():
    def forward(ctx, A, B, upper, left, unit):
        X = _trsm(A, B, upper, left, unit)
        ctx.save_for_backward(A, X)
        ctx.flags = (upper, left, unit)
        return X

    def backward(ctx, g):
        A, X = ctx.saved_tensors
        upper, left, unit = ctx.flags
        gB = _solve_tri(A.mH, g, not upper, left, unit)
        gA = -(gB @ X.mH) if left else -(X.mH @ gB)
        return _tri_part(gA, upper, unit), gB, None, None, None
    return _function("LinalgSolveTriangular", forward, backward)


_SolveTriangular = _lazy(_build_solve_triangular)


def _solve_tri(A, B, upper, left=True, unit=False):
    """Differentiable triangular solve on broadcast operands."""
    A, B = _broadcast_batch(A, B)
    return _SolveTriangular().apply(A, B, upper, left, unit)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A X = B (left=True) or X A = B, A upper or lower triangular
    (unit diagonal assumed when unitriangular); batches broadcast."""
    fname = "linalg.solve_triangular"
    _check(fname, A, arg="A")
    _tensor(fname, B, "B", 2)
    if B.dim() < 2:
        raise RuntimeError(f"{fname}: The input tensor B must have at least 2 dimensions.")
    if B.dtype != A.dtype:  # as torch: the result has A's dtype
        B = B.to(A.dtype)
    k = B.shape[-2] if left else B.shape[-1]
    if A.shape[-1] != k:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{fname}: Incompatible shapes of A and B for the equation {eq} "
                           f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    return _finish(_solve_tri(A, B, upper, left, unitriangular), out)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """torch.triangular_solve: (solution of op(A) X = b, a copy of A)."""
    _check("triangular_solve", A, square=False, arg="A")
    _check("triangular_solve", b, square=False, arg="b")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"A must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")
    M = A.mT if transpose else A
    X = solve_triangular(M, b, upper=upper != transpose, unitriangular=unitriangular)
    return _finish_tuple(_TriSolve(X, A.clone()), out)


# -- LU: getrf / getrs -----------------------------------------------------------------------

def _getrf(A):
    """(LU, pivots int32, info) of A (..., m, n), no autograd."""
    a = _lapack_in(A)
    piv, info = _C._lapack_getrf(a)
    return _back(a, A), _on(piv, A), _on(info, A)


def _lu_solve_raw(LU, piv, B, trans=False):
    lu = _lapack_in(LU)
    b = _lapack_in(B)
    p = piv.detach().cpu().to(_I32).contiguous()
    _C._lapack_getrs(lu, p, b, trans)
    return _back(b, B)


def _inv_message(v):
    return ("linalg.inv", f"The diagonal element {v} is zero, the inversion could not be completed "
                          "because the input matrix is singular.")


def _solve_message(v):
    return ("torch.linalg.solve", "The solver failed because the input matrix is singular.")


def _solve_core(A, B, check=True, message=_solve_message):
    """(X, info) with A X = B for broadcast A (..., n, n), B (..., n, k); no autograd.
    Singular matrices raise (check) or give info > 0 and non-finite values."""
    LU, piv, info = _getrf(A)
    if check:
        _raise_info(info, A.dim() > 2, message)
    if B.numel() == 0 or LU.numel() == 0:
        return B.detach().clone(), info
    return _lu_solve_raw(LU, piv, B), info


def _build_solve():
    def forward(ctx, A, B, check, message):
        X, info = _solve_core(A, B, check, message)
        ctx.save_for_backward(A, X)
        ctx.mark_non_differentiable(info)
        return X, info

    def backward(ctx, g, _ginfo):
        A, X = ctx.saved_tensors
        gB = _solve(A.mH, g)
        return -(gB @ X.mH), gB, None, None
    return _function("LinalgSolveEx", forward, backward)


_SolveFn = _lazy(_build_solve)


def _solve(A, B, check=True, message=_solve_message):
    """Differentiable X with A X = B (B a batch of matrices, batches broadcast)."""
    A, B = _broadcast_batch(A, B)
    return _SolveFn().apply(A, B, check, message)[0]


def _solve_args(fname, A, B, left):
    _check(fname, A, arg="A")
    _tensor(fname, B, "B", 2)
    _same_dtype(fname, A, B)
    if not left:
        if B.dim() < 2 or B.shape[-1] != A.shape[-2]:
            shape = f"{B.shape[-2]}x{B.shape[-1]}" if B.dim() >= 2 else f"{B.shape[-1]}"
            raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation XA = B "
                               f"({A.shape[-2]}x{A.shape[-1]} and {shape})")
        return A.mT, B.mT, False
    vector = B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.shape[-2] != A.shape[-1]:
        raise RuntimeError(f"{fname}: Incompatible shapes of A and B for the equation AX = B "
                           f"({A.shape[-2]}x{A.shape[-1]} and {Bm.shape[-2]}x{Bm.shape[-1]})")
    return A, Bm, vector


def solve(A, B, *, left=True, out=None):
    """X with A X = B (left) or X A = B; B a matrix, batch of matrices, or vector(s)."""
    A2, B2, vector = _solve_args("linalg.solve", A, B, left)
    X = _solve(A2, B2)
    X = X.squeeze(-1) if vector else (X if left else X.mT)
    return _finish(X, out)


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """solve without raising on singular input (unless check_errors): (result, info)."""
    A2, B2, vector = _solve_args("linalg.solve", A, B, left)
    A2, B2 = _broadcast_batch(A2, B2)
    X, info = _SolveFn().apply(A2, B2, check_errors, _solve_message)
    X = X.squeeze(-1) if vector else (X if left else X.mT)
    return _finish_tuple(_SolveEx(X, info), out)


@_fp32_policy
def inv(A, *, out=None):
    """The inverse of square matrices (LinAlgError when one is singular)."""
    _check("linalg.inv", A)
    return _finish(_solve(A, _eye_like(A).expand(A.shape), True, _inv_message), out)


def inv_ex(A, *, check_errors=False, out=None):
    """(inverse, info): info > 0 marks singular matrices instead of raising."""
    _check("linalg.inv_ex", A)
    X, info = _SolveFn().apply(A, _eye_like(A).expand(A.shape), check_errors, _inv_message)
    return _finish_tuple(_InvEx(X, info), out)


def _lu_square_backward(L, U, gL, gU):
    """gA of A = L U (square, L unit lower): L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T."""
    phi = _C.tril(L.mT @ gL, -1) + _C.triu(gU @ U.mT)
    X = _solve_tri(L.mT, phi, upper=True, unit=True)
    return _solve_tri(U.mT, X, upper=False, left=False)


def _build_lu_factor():
    def forward(ctx, A):
        LU, piv, info = _getrf(A)
        ctx.save_for_backward(LU, piv)
        ctx.mark_non_differentiable(piv, info)
        return LU, piv, info

    def backward(ctx, gLU, _gpiv, _ginfo):
        # P^T A = L U with L m x k (unit lower), U k x n. The square block
        # A1 = L1 U1 takes the square formula; the rest of a tall A is
        # L2 = A2 U^-1, of a wide one U2 = L^-1 A2, which add their terms.
        LU, piv = ctx.saved_tensors
        m, n = LU.shape[-2], LU.shape[-1]
        k = min(m, n)
        L = _C.tril(LU[..., :, :k], -1) + _C.eye(m, k, dtype=LU.dtype, device=LU.device)
        U = _C.triu(LU[..., :k, :])
        gL, gU = _C.tril(gLU[..., :, :k], -1), _C.triu(gLU[..., :k, :])
        if m == n:
            gA = _lu_square_backward(L, U, gL, gU)
        elif m > n:
            gA2 = _solve_tri(U.mT, gL[..., n:, :], upper=False, left=False)  # gL2 U^-T
            gU = gU - L[..., n:, :].mT @ gA2
            gA = _C.cat([_lu_square_backward(L[..., :n, :], U, gL[..., :n, :], gU), gA2], -2)
        else:
            gA2 = _solve_tri(L.mT, gU[..., m:], upper=True, unit=True)  # L^-T gU2
            gL = gL - gA2 @ U[..., m:].mT
            gA = _C.cat([_lu_square_backward(L, U[..., :m], gL, gU[..., :m]), gA2], -1)
        return _perm_matrix(piv, m, LU) @ gA
    return _function("LinalgLuFactorEx", forward, backward)


_LUFactorFn = _lazy(_build_lu_factor)


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """(LU, pivots, info) of A = P L U (partial pivoting, getrf)."""
    _tensor("linalg.lu_factor_ex", A)
    if A.dim() < 2:
        raise RuntimeError(f"torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(A.shape)} instead")
    _check("linalg.lu_factor_ex", A, square=False)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    LU, piv, info = _LUFactorFn().apply(A)
    if check_errors:
        _raise_info(info, A.dim() > 2, lambda v: ("linalg.lu_factor_ex", f"The factorization could not "
                                                  f"be completed because U[{v},{v}] is zero."))
    return _finish_tuple(_LUFactorEx(LU, piv, info), out)


def lu_factor(A, *, pivot=True, out=None):
    """(LU, pivots) of A; RuntimeError when U has a zero on its diagonal."""
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    err = _first_error(info)
    if err is not None:
        prefix = f"(Batch element {err[0]}): " if A.dim() > 2 else ""
        v = err[1]
        raise RuntimeError(f"torch.linalg.lu_factor: {prefix}U[{v},{v}] is zero and using it on lu_solve "
                           "would result in a division by zero. If you still want to perform the "
                           "factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
    return _finish_tuple(_LUFactor(LU, piv), out)


def _perm_matrix(piv, m, like):
    """P (..., m, m) with A = P L U, from getrf's 1-based row swaps."""
    batch = tuple(piv.shape[:-1])
    rows = piv.reshape(-1, piv.shape[-1]).tolist() if piv.numel() else [[]] * max(1, math.prod(batch))
    P = []
    for swaps in rows:
        perm = list(range(m))
        for i, p in enumerate(swaps):
            perm[i], perm[p - 1] = perm[p - 1], perm[i]
        col = [0] * m
        for i, r in enumerate(perm):
            col[r] = i  # P[perm[i], i] = 1
        P.append(col)
    idx = _C.tensor(P, dtype=_I64).reshape(*batch, m) if m else _C.zeros(*batch, 0, dtype=_I64)
    eye = _C.eye(m, dtype=like.dtype)
    return _on(eye[idx.reshape(-1)].reshape(*batch, m, m), like)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """(P, L, U) from lu_factor's result."""
    _check("lu_unpack", LU_data, square=False, arg="LU_data")
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    empty = _C.empty(0, dtype=LU_data.dtype, device=LU_data.device)
    if unpack_data:
        L = _C.tril(LU_data[..., :, :k], -1) + _C.eye(m, k, dtype=LU_data.dtype, device=LU_data.device)
        U = _C.triu(LU_data[..., :k, :])
    else:
        L = U = empty
    P = _perm_matrix(LU_pivots, m, LU_data) if unpack_pivots else empty
    return _finish_tuple(_LUUnpack(P, L, U), out)


def lu(A, *, pivot=True, out=None):
    """(P, L, U) with A = P L U (differentiable through lu_factor)."""
    LU, piv, _ = lu_factor_ex(A, pivot=pivot)
    return _finish_tuple(_LU(*lu_unpack(LU, piv)), out)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """X with A X = B (A^H X = B when adjoint; X A = B when not left) from
    lu_factor's (LU, pivots). Composed of triangular solves: differentiable
    in LU and B."""
    fname = "linalg.lu_solve"
    _check(fname, LU, arg="LU")
    _check(fname, B, square=False, arg="B")
    _same_dtype(fname, LU, B, "LU")
    if not left:
        # X A = B is A^H X^H = B^H (X A^H = B is A X^H = B^H)
        return _finish(lu_solve(LU, pivots, B.mH, left=True, adjoint=not adjoint).mH, out)
    if B.shape[-2] != LU.shape[-1]:
        raise RuntimeError(f"{fname}: Incompatible shapes of A and B for the equation AX = B "
                           f"({LU.shape[-2]}x{LU.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    P = _perm_matrix(pivots, LU.shape[-1], LU)
    if not adjoint:  # A = P L U: X = U^-1 L^-1 P^T B
        Y = _solve_tri(LU, P.mT @ B, upper=False, unit=True)
        X = _solve_tri(LU, Y, upper=True)
    else:            # A^H = U^H L^H P^T: X = P L^-H U^-H B
        Y = _solve_tri(LU.mH, B, upper=False)
        X = P @ _solve_tri(LU.mH, Y, upper=True, unit=True)
    return _finish(X, out)


def _torch_lu_solve(b, LU_data, LU_pivots, *, out=None):
    """torch.lu_solve(b, LU_data, LU_pivots)."""
    return lu_solve(LU_data, LU_pivots, b, out=out)


def _torch_lu(A, pivot=True, get_infos=False, out=None):
    """torch.lu: (A_LU, pivots) or (A_LU, pivots, infos)."""
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    return _finish_tuple((LU, piv, info) if get_infos else (LU, piv), out)


# -- determinants ----------------------------------------------------------------------------

def _det_parts(A):
    """(sign, logabsdet, det) of A from its LU factorization, no autograd."""
    n = A.shape[-1]
    if n == 0:
        one = _C.ones(tuple(A.shape[:-2]), dtype=A.dtype, device=A.device)
        return one, _C.zeros_like(one), one
    LU, piv, _ = _getrf(A)
    d = _diag(LU)
    swaps = (piv != _C.arange(1, n + 1, dtype=_I32, device=A.device)).sum(-1)
    psign = 1 - 2 * (swaps % 2).to(A.dtype)
    sign = psign * _C.sgn(d).prod(-1)  # complex: the unit-modulus phase of det
    logabs = _C.log(_C.abs(d)).sum(-1)
    return sign, logabs, psign * d.prod(-1)


def _cofactor(A, det):
    """d det(A) / dA = det(A) A^-T; through the SVD where A is singular."""
    X, info = _solve_core(A.mT, _eye_like(A).expand(A.shape), check=False)
    if _first_error(info) is None:
        return det.unsqueeze(-1).unsqueeze(-1) * X
    # A = U S Vh: det(A) A^-T = det(U) det(Vh) U diag(prod_{j != i} s_j) Vh
    U, S, Vh = _svd_raw(A, True, False)
    n = S.shape[-1]
    others = _C.stack([_C.cat([S[..., :i], S[..., i + 1:]], -1).prod(-1) for i in range(n)], -1)
    sU, sV = _det_parts(U)[0], _det_parts(Vh)[0]
    return (sU * sV).unsqueeze(-1).unsqueeze(-1) * (U * others.unsqueeze(-2)) @ Vh


def _build_det():
    def forward(ctx, A):
        det = _det_parts(A)[2]
        ctx.save_for_backward(A, det)
        return det

    def backward(ctx, g):
        # complex A: g * conj(det A^-T) (Note [complex gradients])
        A, det = ctx.saved_tensors
        if A.requires_grad and _C.is_grad_enabled():  # double backward: stay differentiable
            return g.unsqueeze(-1).unsqueeze(-1) * _conj(det).unsqueeze(-1).unsqueeze(-1) * inv(A).mH
        return g.unsqueeze(-1).unsqueeze(-1) * _conj(_cofactor(A.detach(), det.detach()))
    return _function("LinalgDet", forward, backward)


_DetFn = _lazy(_build_det)


def det(A, *, out=None):
    """The determinant of square matrices (LU; 0 for singular ones)."""
    _check("linalg.det", A)
    return _finish(_DetFn().apply(A), out)


def _build_slogdet():
    def forward(ctx, A):
        sign, logabs, _ = _det_parts(A)
        ctx.save_for_backward(A, sign)
        if not A.dtype.is_complex:  # a real sign is piecewise constant; a complex one is e^{i arg det}
            ctx.mark_non_differentiable(sign)
        return sign, logabs

    def backward(ctx, gsign, g):
        # d log det = tr(A^-1 dA): log|det| takes its real part, arg det its imaginary part, so the
        # gradient is (g + i Im(gsign conj(sign))) A^-H (g alone for real A)
        A, sign = ctx.saved_tensors
        if A.dtype.is_complex:
            g = _C.zeros_like(sign, dtype=_C.real(sign).dtype) if g is None else g
            if gsign is not None:
                g = g + 1j * _C.imag(gsign * _conj(sign))
        return g.unsqueeze(-1).unsqueeze(-1) * inv(A).mH
    return _function("LinalgSlogdet", forward, backward)


_SlogdetFn = _lazy(_build_slogdet)


def slogdet(A, *, out=None):
    """(sign, log|det|) of square matrices; sign 0 and -inf for singular ones."""
    _check("linalg.slogdet", A)
    return _finish_tuple(_LinalgSlogdet(*_SlogdetFn().apply(A)), out)


def _torch_slogdet(input):
    _check("linalg.slogdet", input)
    return _Slogdet(*_SlogdetFn().apply(input))


def logdet(input):
    """log det(A): nan where det < 0, -inf where it is 0."""
    _check("logdet", input)
    sign, logabs = _SlogdetFn().apply(input)
    return logabs + _C.log(sign)
