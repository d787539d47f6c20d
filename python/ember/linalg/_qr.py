"""ember.linalg's QR family (LAPACK geqrf / orgqr): qr with its gradient,
householder_product, and torch's geqrf and ormqr (conventions: _lapack.py)."""
from .. import _C
from .._shape_functions import diag_embed as _diag_embed
from ._lapack import (_Geqrf, _LinalgQR, _back, _check, _eye_like, _finish, _finish_tuple, _function,
                      _lapack_in, _lazy, _on, _same_dtype, _tensor)
from ._solve import _solve_tri


# -- QR: geqrf / orgqr -----------------------------------------------------------------------

def _qr_raw(A, mode):
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    a = _lapack_in(A)
    tau = _C._lapack_geqrf(a)
    Rfull = _back(a, A)
    if mode == "r":
        return _C.empty(0, dtype=A.dtype, device=A.device), _C.triu(Rfull[..., :k, :])
    if mode == "complete" and m > n:
        q = _C.zeros(*A.shape[:-2], m, m, dtype=A.dtype)
        q[..., :n, :] = a
        R = _C.triu(Rfull)
    else:
        q = a[..., :k, :].contiguous()
        R = _C.triu(Rfull[..., :k, :])
    _C._lapack_orgqr(q, tau)
    return _back(q, A), R


def _qr_back_tall(Q, R, gQ, gR):
    """gA of A = Q R, m >= n (reduced): (gQ + Q copyltu(M)) R^-H, M = R gR^H - gQ^H Q (complex:
    conjugate transposes; R's diagonal is real, so only M's real diagonal enters)."""
    M = R @ gR.mH - gQ.mH @ Q
    if M.dtype.is_complex:
        M = _C.tril(M, -1) + _C.tril(M, -1).mH + _diag_embed(_C.real(_C.diagonal(M, 0, -2, -1)).to(M.dtype))
    else:
        M = _C.tril(M) + _C.tril(M, -1).mT
    return _solve_tri(R.mH, gQ + Q @ M, upper=False, left=False)


def _build_qr():
    def forward(ctx, A, mode):
        Q, R = _qr_raw(A, mode)
        ctx.save_for_backward(Q, R, A)
        ctx.mode = mode
        return Q, R

    def backward(ctx, gQ, gR):
        Q, R, A = ctx.saved_tensors
        m, n = A.shape[-2], A.shape[-1]
        if ctx.mode == "r":
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                               "Please use linalg.qr(A, mode='reduced') if you are going to differentiate "
                               "through linalg.qr.")
        if ctx.mode == "complete" and m > n:
            raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
        if m >= n:
            return _qr_back_tall(Q, R, gQ, gR), None
        # wide: A = Q [R1 R2] with X = A[:, :m] = Q R1 and Y = A[:, m:] = Q R2
        Y = A[..., m:]
        gX = _qr_back_tall(Q, R[..., :m], gQ + Y @ gR[..., m:].mH, gR[..., :m])
        return _C.cat([gX, Q @ gR[..., m:]], -1), None
    return _function("LinalgQr", forward, backward)


_QRFn = _lazy(_build_qr)


def qr(A, mode="reduced", *, out=None):
    """(Q, R) with A = Q R; mode 'reduced' (Q m x k), 'complete' (Q m x m) or 'r' (R only)."""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
                           "'r', or 'complete'")
    _check("linalg.qr", A, square=False)
    return _finish_tuple(_LinalgQR(*_QRFn().apply(A, mode)), out)


def _torch_qr(input, some=True, *, out=None):
    """torch.qr was removed in torch 2 (it raises there, naming linalg.qr's mode); ember raises alike."""
    raise RuntimeError(
        "This function was deprecated since version 1.9 and is now removed. `torch.qr` is deprecated in favor "
        "of `torch.linalg.qr` and the boolean parameter `some` has been replaced with a string parameter "
        "`mode`.\n\nQ, R = torch.qr(A) should be replaced with:\nQ, R = torch.linalg.qr(A, mode='reduced')\n\n"
        "and\n\nQ, R = torch.qr(A, some=False) should be replaced with:\nQ, R = torch.linalg.qr(A, "
        f"mode='complete')\n\nSince `some` was set to {bool(some)}, use mode='{'reduced' if some else 'complete'}'.")


def _householder_composite(A, tau):
    """H_1 ... H_k's first n columns, H_i = I - tau_i v_i v_i^T, as ember ops (differentiable)."""
    m, n = A.shape[-2], A.shape[-1]
    batch = tuple(A.shape[:-2])
    Q = _eye_like(A, m).expand(*batch, m, m)
    for i in range(tau.shape[-1]):
        head = _C.zeros(*batch, i + 1, dtype=A.dtype, device=A.device)
        head[..., i] = 1
        v = _C.cat([head, A[..., i + 1:, i]], -1)
        Q = Q - tau[..., i, None, None] * (Q @ v.unsqueeze(-1)) * v.unsqueeze(-2)
    return Q[..., :n]


def householder_product(A, tau, *, out=None):
    """Q's first n columns from Householder vectors (orgqr; composed of ember
    ops when a gradient is needed)."""
    fname = "torch.linalg.householder_product"
    _check(fname, A, square=False, arg="input")
    _tensor(fname, tau, "tau", 2)
    if A.shape[-2] < A.shape[-1]:
        raise RuntimeError(f"{fname}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if tau.shape[-1] > A.shape[-1]:
        raise RuntimeError(f"{fname}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tau.dim() != A.dim() - 1 or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{fname}: Expected batch dimensions of tau to be equal to input.shape[:-2], "
                           f"but got {tuple(tau.shape[:-1])}")
    _same_dtype(fname, A, tau)
    if _C.is_grad_enabled() and (A.requires_grad or tau.requires_grad):
        return _finish(_householder_composite(A, tau), out)
    q = _lapack_in(A)
    _C._lapack_orgqr(q, tau.detach().cpu().contiguous())
    return _finish(_back(q, A), out)


def geqrf(input, *, out=None):
    """LAPACK's geqrf: (R above the diagonal with the Householder vectors
    below it, tau); no gradient, as torch."""
    _tensor("geqrf", input, "input")
    if input.dim() < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    _check("geqrf", input, square=False, arg="input")
    a = _lapack_in(input)
    tau = _C._lapack_geqrf(a)
    return _finish_tuple(_Geqrf(_back(a, input), _on(tau, input)), out)


def ormqr(input, tau, other, left=True, transpose=False, *, out=None):
    """other multiplied by geqrf's Q (m x m, from its reflectors): Q C, Q^T C,
    C Q or C Q^T. Composed of householder_product and matmul."""
    fname = "torch.ormqr"
    _check(fname, input, square=False, arg="input")
    _check(fname, other, square=False, arg="other")
    m, n = input.shape[-2], input.shape[-1]
    if (other.shape[-2] if left else other.shape[-1]) != m:
        side = "other.shape[-2]" if left else "other.shape[-1]"
        raise RuntimeError(f"{fname}: {side} must be equal to input.shape[-2]")
    if m > n:  # complete Q: pad the reflectors with zero columns
        input = _C.cat([input, _C.zeros(*input.shape[:-1], m - n, dtype=input.dtype, device=input.device)], -1)
    Q = householder_product(input[..., :m], tau)
    if transpose:
        Q = Q.mT
    return _finish(Q @ other if left else other @ Q, out)
