"""ember.linalg's Cholesky family (LAPACK potrf, then triangular solves):
cholesky, cholesky_ex, cholesky_solve and cholesky_inverse, with the
factor's gradient as an autograd Function (conventions: _lapack.py)."""
from .. import _C
from .._autocast_policy import fp32_policy as _fp32_policy
from .._shape_functions import diag_embed as _diag_embed
from ._lapack import (_CholEx, _back, _check, _diag, _eye_like, _finish, _finish_tuple, _function, _lapack_in,
                      _lazy, _on, _raise_info, _same_dtype)
from ._solve import _solve_tri


# -- Cholesky: potrf / potrs -----------------------------------------------------------------

def _chol_message(fname):
    return lambda v: (fname, f"The factorization could not be completed because the input is not "
                             f"positive-definite (the leading minor of order {v} is not positive-definite).")


def _chol_raw(A):
    """(L, info): the lower factor of A = L L^T from A's lower triangle."""
    a = _lapack_in(A)
    info = _C._lapack_potrf(a, False)
    return _C.tril(_back(a, A)), _on(info, A)


def _build_cholesky():
    def forward(ctx, A, check, fname):
        L, info = _chol_raw(A)
        if check:
            _raise_info(info, A.dim() > 2, _chol_message(fname))
        ctx.save_for_backward(L)
        ctx.mark_non_differentiable(info)
        return L, info

    def backward(ctx, gL, _ginfo):
        # gA = sym(L^-T Phi(L^T gL) L^-1), Phi: the lower triangle, diagonal halved
        L, = ctx.saved_tensors
        P = _C.tril(L.mH @ _C.tril(gL))
        P = P - 0.5 * _diag_embed(_diag(P))
        S = _solve_tri(L.mH, P, upper=True)
        S = _solve_tri(L, S, upper=False, left=False)
        return 0.5 * (S + S.mH), None, None
    return _function("LinalgCholeskyEx", forward, backward)


_CholFn = _lazy(_build_cholesky)


@_fp32_policy
def cholesky(A, *, upper=False, out=None):
    """L with A = L L^T (or U = L^T when upper) for symmetric positive-definite A."""
    _check("linalg.cholesky", A)
    L = _CholFn().apply(A, True, "linalg.cholesky")[0]
    return _finish(L.mH if upper else L, out)


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """(L, info): info > 0 marks matrices that are not positive-definite."""
    _check("linalg.cholesky_ex", A)
    L, info = _CholFn().apply(A, check_errors, "linalg.cholesky_ex")
    return _finish_tuple(_CholEx(L.mH if upper else L, info), out)


def _torch_cholesky(input, upper=False, *, out=None):
    """torch.cholesky was removed in torch 2 (it raises there); ember raises alike."""
    raise RuntimeError(
        "This function was deprecated since version 1.9 and is now removed. `torch.cholesky` is deprecated "
        "in favor of `torch.linalg.cholesky`.\nL = torch.cholesky(A) should be replaced with:\n"
        "L = torch.linalg.cholesky(A)\nU = torch.cholesky(A, upper=True) should be replaced with:\n"
        "U = torch.linalg.cholesky(A).mH")


def cholesky_solve(B, L, upper=False, *, out=None):
    """X with A X = B from A's Cholesky factor (two triangular solves: differentiable)."""
    _check("cholesky_solve", L, arg="L")
    _check("cholesky_solve", B, square=False, arg="B")
    _same_dtype("cholesky_solve", L, B)
    if B.shape[-2] != L.shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is {L.shape[-2]} by "
                           f"{L.shape[-1]} but each b matrix is {B.shape[-2]} by {B.shape[-1]}")
    Lo = L.mH if upper else L
    Y = _solve_tri(Lo, B, upper=False)
    return _finish(_solve_tri(Lo.mH, Y, upper=True), out)


def cholesky_inverse(L, upper=False, *, out=None):
    """A^-1 from A's Cholesky factor."""
    _check("cholesky_inverse", L, arg="A")
    return _finish(cholesky_solve(_eye_like(L).expand(L.shape), L, upper), out)
