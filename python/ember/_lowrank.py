"""svd_lowrank and pca_lowrank: randomized truncated SVD (Halko, Martinsson and Tropp 2011,
algorithms 4.4 and 5.1) built on linalg.qr and linalg.svd; differentiable through them."""
from . import _C
from .linalg import qr, svd

__all__ = ["svd_lowrank", "pca_lowrank"]


def _h(x):
    return x.mT.conj() if x.is_complex() else x.mT


def _range_basis(A, q, niter, M):
    """An orthonormal (m, q) basis whose span approximates A's range (subspace iteration)."""
    R = _C.randn(*A.shape[:-2], A.shape[-1], q, dtype=A.dtype, device=A.device)
    X = A @ R
    if M is not None:
        X = X - M @ R
    Q = qr(X).Q
    for _ in range(niter):
        Y = _h(A) @ Q
        if M is not None:
            Y = Y - _h(M) @ Q
        Q = qr(Y).Q
        X = A @ Q
        if M is not None:
            X = X - M @ Q
        Q = qr(X).Q
    return Q


def _svd_lowrank(A, q, niter, M):
    m, n = A.shape[-2:]
    if m < n:  # factor the tall transpose: the basis is then found in the smaller dimension
        U, S, V = _svd_lowrank(_h(A), q, niter, None if M is None else _h(M))
        return V, S, U
    Q = _range_basis(A, q, niter, M)
    B = _h(Q) @ A
    if M is not None:
        B = B - _h(Q) @ M
    Ub, S, Vh = svd(B, full_matrices=False)
    return Q @ Ub, S, _h(Vh)


def _check_args(name, A, q, niter, M=None):
    if not isinstance(A, _C.Tensor):
        raise TypeError(f"{name}(): argument 'A' must be Tensor, not {type(A).__name__}")
    if M is not None and not isinstance(M, _C.Tensor):
        raise TypeError(f"{name}(): argument 'M' must be Tensor or None, not {type(M).__name__}")
    for arg, value in (("q", q), ("niter", niter)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name}(): argument '{arg}' must be int, not {type(value).__name__}")
    if not A.is_floating_point() and not A.is_complex():
        raise RuntimeError(f"{name}(): expected a floating-point or complex tensor, got {A.dtype}")


def svd_lowrank(A, q=6, niter=2, M=None):
    """U, S, V with A - M ~= U diag(S) V^H, of rank q (A: (*, m, n))."""
    _check_args("svd_lowrank", A, q, niter, M)
    if A.dim() < 2:
        raise RuntimeError(f"svd_lowrank: expected a matrix or a batch of matrices, got shape {tuple(A.shape)}")
    q = 6 if q is None else int(q)
    if not 0 <= q <= min(A.shape[-2:]):
        raise ValueError(f"svd_lowrank: q={q} must be in [0, min(m, n)={min(A.shape[-2:])}]")
    if niter < 0:
        raise ValueError(f"svd_lowrank: niter={niter} must be non-negative")
    if M is not None:
        M = M.broadcast_to(A.shape)
    return _svd_lowrank(A, q, niter, M)


def pca_lowrank(A, q=None, center=True, niter=2):
    """U, S, V of the (column-centred, when center) data matrix A, of rank q (default min(6, m, n))."""
    _check_args("pca_lowrank", A, q, niter)
    if A.dim() < 2:
        raise RuntimeError(f"pca_lowrank: expected a matrix or a batch of matrices, got shape {tuple(A.shape)}")
    m, n = A.shape[-2:]
    q = min(6, m, n) if q is None else int(q)
    if not 0 <= q <= min(m, n):
        raise ValueError(f"pca_lowrank: q={q} must be in [0, min(m, n)={min(m, n)}]")
    if niter < 0:
        raise ValueError(f"pca_lowrank: niter={niter} must be non-negative")
    if not center:
        return _svd_lowrank(A, q, niter, None)
    mean = A.mean(dim=-2, keepdim=True)
    return _svd_lowrank(A - mean, q, niter, None)
