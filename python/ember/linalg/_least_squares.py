"""ember.linalg's least squares (LAPACK gelsd) and what the singular values
give: lstsq, pinv (and torch.pinverse), matrix_rank and cond."""
import math

from .. import _C
from ._lapack import (_F32, _F64, _I64, _Lstsq, _back, _broadcast_batch, _check, _finish, _lapack_in, _nograd,
                      _on, _tensor, _tname)
from ._norms import matrix_norm
from ._solve import inv_ex
from ._spectral import eigh, eigvalsh, svd, svdvals


# -- least squares (gelsd), pseudo-inverse, rank, condition number ---------------------------

def _eps(dtype):
    return 1.1920928955078125e-07 if dtype in (_F32, _C._dtypes["complex64"]) else 2.220446049250313e-16


def _real_dtype(dtype):
    """The dtype of |z| for dtype's values (singular values, tolerances)."""
    return {"complex64": _F32, "complex128": _F64}.get(str(dtype).split(".")[-1], dtype)


def lstsq(A, B, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values) of min ||A X - B||, as torch
    reports them for `driver` (CPU default 'gelsy'); computed with gelsd, or
    as pinv(A) @ B when a gradient is needed."""
    fname = "torch.linalg.lstsq"
    _tensor("linalg.lstsq", A, "self")
    _tensor("linalg.lstsq", B, "b", 2)
    if A.dim() < 2:
        raise RuntimeError(f"{fname}: input must have at least 2 dimensions.")
    if _real_dtype(A.dtype) not in (_F32, _F64) or _real_dtype(B.dtype) not in (_F32, _F64):
        raise RuntimeError("This function doesn't handle types other than float and double")
    if driver is None:
        driver = "gelsy"
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(f"{fname}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if A.dtype != B.dtype:
        raise RuntimeError(f"{fname}: Expected input and other to have the same dtype, but got input's dtype "
                           f"{_tname(A.dtype)} and other's dtype {_tname(B.dtype)}")
    if not (A.dim() >= B.dim() and A.dim() - B.dim() <= 1):
        raise RuntimeError(f"{fname}: input.dim() must be greater or equal to other.dim() and "
                           "(input.dim() - other.dim()) <= 1")
    vector = B.dim() == A.dim() - 1
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.shape[-2] != A.shape[-2]:
        raise RuntimeError(f"{fname}: input.size(-2) should match other.size(-2)")
    m, n = A.shape[-2], A.shape[-1]
    A2, B2 = _broadcast_batch(A, Bm)
    if rcond is None:
        rcond = _eps(A.dtype) * max(m, n)
    b = _C.zeros(*B2.shape[:-2], B2.shape[-1], max(m, n), dtype=A.dtype)
    b[..., :m] = _lapack_in(B2)
    s, rank, info = _C._lapack_gelsd(_lapack_in(A2), b, float(rcond))
    X = _back(b, A)[..., :n, :]
    if A.requires_grad or B.requires_grad:
        X = pinv(A2, rtol=rcond) @ B2
    empty = _C.empty(0, dtype=_real_dtype(A.dtype), device=A.device)  # residuals and singular values are real
    full_rank = bool((rank == min(m, n)).all()) if rank.numel() else True
    if m > n and driver != "gelsy" and full_rank:
        residuals = (_C.abs(A2 @ X - B2) ** 2).sum(-2)  # real for complex input too
        if vector:
            residuals = residuals.squeeze(-1)
    else:
        residuals = empty
    if vector:
        X = X.squeeze(-1)
    rank = _on(rank, A) if driver != "gels" else _C.empty(0, dtype=_I64, device=A.device)
    sv = _on(s, A) if driver in ("gelsd", "gelss") else empty
    return _Lstsq(X, residuals, rank, sv)


def _tolerances(fname, A, atol, rtol, smax):
    """max(atol, rtol * smax) with torch's defaults (rtol = eps * max(m, n) when atol is not given)."""
    def as_t(x):  # a tensor tolerance has A's batch shape: one per matrix
        return x.unsqueeze(-1) if isinstance(x, _C.Tensor) else _C.tensor(float(x), dtype=_real_dtype(A.dtype),
                                                                          device=A.device)
    if rtol is None:
        given = atol is not None and (isinstance(atol, _C.Tensor) or atol > 0)
        rtol = 0.0 if given else _eps(A.dtype) * max(A.shape[-2], A.shape[-1])
    tol = as_t(rtol) * smax
    if atol is not None:
        tol = _C.maximum(as_t(atol), tol)
    return tol


def pinv(A, *, atol=None, rtol=None, hermitian=False, out=None, rcond=None):
    """The Moore-Penrose pseudo-inverse through the SVD (eigh when hermitian);
    singular values at most max(atol, rtol * largest) count as zero."""
    fname = "linalg.pinv"
    _tensor(fname, A, "input")
    if A.dim() < 2 or _real_dtype(A.dtype) not in (_F32, _F64):
        raise RuntimeError(f"{fname}({_tname(A.dtype)}{{{list(A.shape)}}}): expected a tensor with 2 or more "
                           "dimensions of float, double, cfloat or cdouble types")
    if rcond is not None:
        rtol = rcond
    m, n = A.shape[-2], A.shape[-1]
    if m == 0 or n == 0:
        return _finish(_C.zeros(*A.shape[:-2], n, m, dtype=A.dtype, device=A.device), out)
    if hermitian:
        L, V = eigh(A)
        absL = _C.abs(L)
        tol = _tolerances(fname, A, atol, rtol, absL.amax(-1, keepdim=True))
        keep = absL > tol
        inv_l = _C.where(keep, 1 / _C.where(keep, L, _C.ones_like(L)), _C.zeros_like(L))
        return _finish((V * inv_l.to(V.dtype).unsqueeze(-2)) @ V.mH, out)
    U, S, Vh = svd(A, full_matrices=False)
    tol = _tolerances(fname, A, atol, rtol, S[..., :1])
    keep = S > tol
    inv_s = _C.where(keep, 1 / _C.where(keep, S, _C.ones_like(S)), _C.zeros_like(S))
    return _finish((Vh.mH * inv_s.to(U.dtype).unsqueeze(-2)) @ U.mH, out)


def pinverse(input, rcond=1e-15):
    """torch.pinverse: pinv with rtol=rcond."""
    return pinv(input, rtol=rcond)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, out=None, tol=None):
    """The number of singular values (|eigenvalues| when hermitian) above max(atol, rtol * largest)."""
    fname = "linalg.matrix_rank"
    _tensor(fname, A, "input")
    if A.dim() < 2:
        raise RuntimeError("torch.linalg.matrix_rank: The input tensor input must have at least 2 dimensions.")
    if _real_dtype(A.dtype) not in (_F32, _F64):
        raise RuntimeError("This function doesn't handle types other than float and double")
    _check(fname, A, square=hermitian)
    if tol is not None:
        atol, rtol = tol, 0.0
    with _nograd():
        S = _C.abs(eigvalsh(A)) if hermitian else svdvals(A)
        if S.shape[-1] == 0:
            return _finish(_C.zeros(tuple(A.shape[:-2]), dtype=_I64, device=A.device), out)
        tol_ = _tolerances(fname, A, atol, rtol, S.amax(-1, keepdim=True))
        return _finish((S > tol_).sum(-1), out)


def cond(A, p=None, *, out=None):
    """The condition number ||A|| ||A^-1|| in norm p (None/2/-2 from the singular values)."""
    fname = "linalg.cond"
    _tensor(fname, A)
    if A.dim() < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    if p not in (None, 2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1):
        raise ValueError(f"linalg.cond got an invalid norm type: {p}")
    _check(f"linalg.cond(ord={p})" if p not in (None, 2, -2) else fname, A, square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        S = svdvals(A)
        r = S[..., 0] / S[..., -1] if p != -2 else S[..., -1] / S[..., 0]
        return _finish(r, out)
    Ainv, info = inv_ex(A)
    r = matrix_norm(A, p) * matrix_norm(Ainv, p)
    bad = info > 0
    if bool(bad.any()):  # singular: torch reports inf
        r = _C.where(bad, _C.full_like(r, math.inf), r)
    return _finish(r, out)
