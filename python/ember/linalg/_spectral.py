"""ember.linalg's spectral decompositions: the SVD (LAPACK gesdd: svd,
svdvals, torch.svd), the symmetric / Hermitian eigendecomposition (syevd,
heevd: eigh, eigvalsh) and the general one (geev: eig, eigvals, complex
results), with their gradients as autograd Functions (conventions:
_lapack.py)."""
from .. import _C
from .._shape_functions import diag_embed as _diag_embed
from ._lapack import (_Eig, _Eigh, _LinalgSVD, _SVD, _back, _check, _diag, _eye_like, _finish, _finish_tuple,
                      _function, _lapack_in, _lazy, _on, _raise_info, _tensor, _tname)


# -- SVD: gesdd ------------------------------------------------------------------------------

def _svd_message(v):
    if v < 0:  # lapack.c: Note [non-finite input]
        return ("linalg.svd", "The algorithm failed to converge because the input matrix contained "
                              "non-finite values.")
    return ("linalg.svd", "The algorithm failed to converge because the input matrix is ill-conditioned "
                          f"or has too many repeated singular values (error code: {v}).")


def _svd_raw(A, compute_uv, full):
    """(U, S, Vh) of A (U, Vh None without compute_uv), no autograd."""
    m, n = A.shape[-2], A.shape[-1]
    a = _lapack_in(A)
    u, s, vt, info = _C._lapack_gesdd(a, compute_uv, full)
    _raise_info(info, A.dim() > 2, _svd_message)
    S = _on(s, A)
    if not compute_uv:
        return None, S, None
    U, Vh = _back(u, A), _back(vt, A)
    if min(m, n) == 0 and full:  # LAPACK is not called: the full factors are identities
        U = _eye_like(A, m).expand(U.shape).clone()
        Vh = _eye_like(A, n).expand(Vh.shape).clone()
    return U, S, Vh


def _svd_backward(U, S, Vh, gU, gS, gVh):
    """gA of A = U diag(S) Vh (reduced factors, distinct singular values). Complex factors: the
    same with conjugate transposes, and the phase the pair (u_i, v_i) shares adds
    i (Im diag(U^H gU) - Im diag(V^H gV)) / (2 S) on the diagonal (a loss that does not depend
    on the pairs' common phase has Im diag(U^H gU) = -Im diag(V^H gV))."""
    m, n, k = U.shape[-2], Vh.shape[-1], S.shape[-1]
    gSc = gS.to(U.dtype) if gS is not None and U.dtype.is_complex else gS
    if gU is None and gVh is None:
        return (U * gSc.unsqueeze(-2)) @ Vh
    V = Vh.mH
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1)          # E[i, j] = s_j^2 - s_i^2
    E = E + _C.eye(k, dtype=S.dtype, device=S.device)  # the diagonal is replaced below
    J = _C.zeros(*E.shape, dtype=U.dtype, device=U.device)
    if gU is not None:
        X = U.mH @ gU
        J = J + (X - X.mH) * S.unsqueeze(-2)
    if gVh is not None:
        Y = V.mH @ gVh.mH
        J = J + S.unsqueeze(-1) * (Y - Y.mH)
    J = J / E
    J = J - _diag_embed(_diag(J))
    if gS is not None:
        J = J + _diag_embed(gSc)
    if U.dtype.is_complex:
        phase = _C.zeros_like(S)
        if gU is not None:
            phase = phase + _C.imag(_diag(X))
        if gVh is not None:
            phase = phase - _C.imag(_diag(Y))
        J = J + _diag_embed(1j * phase / (2 * S))
    if m > k and gU is not None:
        gUS = gU / S.unsqueeze(-2)
        return (U @ J + gUS - U @ (U.mH @ gUS)) @ Vh
    if n > k and gVh is not None:
        gVS = gVh.mH / S.unsqueeze(-2)
        return U @ (J @ Vh + gVS.mH - (gVS.mH @ V) @ Vh)
    return U @ J @ Vh


def _build_svd():
    def forward(ctx, A, full):
        U, S, Vh = _svd_raw(A, True, full)
        ctx.save_for_backward(U, S, Vh)
        return U, S, Vh

    def backward(ctx, gU, gS, gVh):
        U, S, Vh = ctx.saved_tensors
        k = S.shape[-1]
        U, Vh = U[..., :k], Vh[..., :k, :]  # full_matrices: the extra columns carry no gradient
        gU = gU[..., :k] if gU is not None else None
        gVh = gVh[..., :k, :] if gVh is not None else None
        return _svd_backward(U, S, Vh, gU, gS, gVh), None
    fn = _function("LinalgSvd", forward, backward)
    return fn


_SVDFn = _lazy(_build_svd)


def _build_svdvals():
    def forward(ctx, A):
        if A.requires_grad:
            U, S, Vh = _svd_raw(A, True, False)
            ctx.save_for_backward(U, Vh, A)
            return S
        return _svd_raw(A, False, False)[1]

    def backward(ctx, gS):
        U, Vh, A = ctx.saved_tensors
        if _C.is_grad_enabled():  # create_graph: U and Vh as functions of A
            U, _, Vh = _SVDFn().apply(A, False)
        return (U * gS.to(U.dtype).unsqueeze(-2)) @ Vh
    return _function("LinalgSvdvals", forward, backward)


_SVDValsFn = _lazy(_build_svdvals)


def svd(A, full_matrices=True, *, driver=None, out=None):
    """(U, S, Vh) with A = U diag(S) Vh, S descending (gesdd)."""
    _check("linalg.svd", A, square=False)
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs "
                           "with cuSOLVER backend.")
    return _finish_tuple(_LinalgSVD(*_SVDFn().apply(A, bool(full_matrices))), out)


def svdvals(A, *, driver=None, out=None):
    """The singular values of A, descending."""
    _check("linalg.svd", A, square=False)
    return _finish(_SVDValsFn().apply(A), out)


def _torch_svd(input, some=True, compute_uv=True, *, out=None):
    """torch.svd: (U, S, V) with V = Vh^T; U and V zero-filled without compute_uv."""
    _check("linalg.svd", input, square=False)
    if not compute_uv:
        m, n = input.shape[-2], input.shape[-1]
        S = svdvals(input)
        b = tuple(input.shape[:-2])
        return _finish_tuple(_SVD(_C.zeros(*b, m, m, dtype=input.dtype, device=input.device), S,
                                  _C.zeros(*b, n, n, dtype=input.dtype, device=input.device)), out)
    U, S, Vh = _SVDFn().apply(input, not some)
    return _finish_tuple(_SVD(U, S, Vh.mT), out)


# -- symmetric eigen: syevd ------------------------------------------------------------------

def _uplo(UPLO):
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO == "U"


def _eigh_raw(A, upper, vectors, fname):
    a = _lapack_in(A)
    w, info = _C._lapack_syevd(a, upper, vectors)
    _raise_info(info, A.dim() > 2, lambda v: (
        fname, "The algorithm failed to converge because the input matrix is ill-conditioned or has "
               f"too many repeated eigenvalues (error code: {v})."))
    return _on(w, A), (_back(a, A) if vectors else None)


def _build_eigh():
    def forward(ctx, A, upper):
        L, V = _eigh_raw(A, upper, True, "linalg.eigh")
        ctx.save_for_backward(L, V)
        return L, V

    def backward(ctx, gL, gV):
        # gA = V (diag(gL) + (V^T gV) / E) V^T, E[i, j] = l_j - l_i off the diagonal
        # complex V: the same with V^H; the diagonal of V^H gV (the eigenvectors' phases, on which
        # a well-defined loss does not depend) is dropped as on reals
        L, V = ctx.saved_tensors
        n = L.shape[-1]
        inner = _C.zeros(*L.shape, n, dtype=V.dtype, device=L.device)
        if gV is not None:
            E = L.unsqueeze(-2) - L.unsqueeze(-1)
            E = E + _C.eye(n, dtype=L.dtype, device=L.device)
            inner = (V.mH @ gV) / E
            inner = inner - _diag_embed(_diag(inner))
        if gL is not None:
            inner = inner + _diag_embed(gL)
        return V @ inner @ V.mH, None
    return _function("LinalgEigh", forward, backward)


_EighFn = _lazy(_build_eigh)


def eigh(A, UPLO="L", *, out=None):
    """(eigenvalues ascending, eigenvectors as columns) of symmetric A, from its UPLO triangle."""
    _check("linalg.eigh", A)
    return _finish_tuple(_Eigh(*_EighFn().apply(A, _uplo(UPLO))), out)


def _build_eigvalsh():
    def forward(ctx, A, upper):
        L, V = _eigh_raw(A, upper, A.requires_grad, "linalg.eigvalsh")
        ctx.save_for_backward(V, A)
        ctx.upper = upper
        return L

    def backward(ctx, gL):
        V, A = ctx.saved_tensors
        if _C.is_grad_enabled():  # create_graph: V as a function of A
            V = _EighFn().apply(A, ctx.upper)[1]
        return (V * gL.unsqueeze(-2)) @ V.mH, None
    return _function("LinalgEigvalsh", forward, backward)


_EigvalshFn = _lazy(_build_eigvalsh)


def eigvalsh(A, UPLO="L", *, out=None):
    """The eigenvalues of symmetric A, ascending."""
    _check("linalg.eigh", A)
    return _finish(_EigvalshFn().apply(A, _uplo(UPLO)), out)


# -- general eigen: geev ---------------------------------------------------------------------

def _eig_raw(A, vectors, fname):
    """(w, V) of A (..., n, n), both complex (complex64 for float32 / complex64 input, complex128
    otherwise); V's columns are unit-norm eigenvectors (LAPACK's normalization, as torch); no
    autograd. Real input takes sgeev / dgeev (exact conjugate pairs), complex input cgeev / zgeev."""
    if not bool(_C.isfinite(A).all()):
        raise RuntimeError(f"torch.{fname}: input tensor should not contain infs or NaNs.")
    a = _lapack_in(A)
    w, vr, info = _C._lapack_geev(a, vectors)
    _raise_info(info, A.dim() > 2, lambda v: (
        fname, "The algorithm failed to converge because the input matrix is ill-conditioned or has "
               f"too many repeated eigenvalues (error code: {v})."))
    return _on(w, A), (_back(vr, A) if vectors else None)


def _real_if(g, A):
    """The gradient of a real A is the real part of the complex one."""
    return g if A.dtype.is_complex else _C.real(g).contiguous()


def _build_eig():
    def forward(ctx, A):
        L, V = _eig_raw(A, True, "linalg.eig")
        ctx.save_for_backward(L, V)
        ctx.real_input = not A.dtype.is_complex
        return L, V

    def backward(ctx, gL, gV):
        # A = V diag(L) V^-1 with unit-norm columns of V: the gradient is
        # V^-H (diag(gL) + (V^H gV - V^H V diag(Re diag(V^H gV))) / conj(E)) V^H,
        # E[i, j] = L_j - L_i off the diagonal (torch's formula for eig).
        L, V = ctx.saved_tensors
        n = L.shape[-1]
        inner = _C.zeros(*L.shape, n, dtype=L.dtype, device=L.device)
        if gV is not None:
            VhgV = V.mH @ gV
            inner = VhgV - V.mH @ (V * _C.real(_diag(VhgV)).unsqueeze(-2))
            E = (L.unsqueeze(-2) - L.unsqueeze(-1)).conj() + _C.eye(n, dtype=L.dtype, device=L.device)
            inner = inner / E
            inner = inner - _diag_embed(_diag(inner))
        if gL is not None:
            inner = inner + _diag_embed(gL)
        from ._solve import solve
        gA = solve(V.mH, inner @ V.mH)
        return _C.real(gA).contiguous() if ctx.real_input else gA
    return _function("LinalgEig", forward, backward)


_EigFn = _lazy(_build_eig)


def _eig_check(fname, A):
    _tensor(fname, A)
    if A.dim() >= 2 and not (A.dtype.is_floating_point or A.dtype.is_complex):
        # torch fails looking for the complex dtype of an integer one: a RuntimeError
        raise RuntimeError(f"{fname}: Expected a floating point or complex tensor as input. Got {_tname(A.dtype)}")
    _check(fname, A)


def eig(A, *, out=None):
    """(eigenvalues, eigenvectors as unit-norm columns) of a general square A, always complex."""
    _eig_check("linalg.eig", A)
    return _finish_tuple(_Eig(*_EigFn().apply(A)), out)


def _build_eigvals():
    def forward(ctx, A):
        L, V = _eig_raw(A, A.requires_grad, "linalg.eigvals")
        ctx.save_for_backward(V, A)
        ctx.real_input = not A.dtype.is_complex
        return L

    def backward(ctx, gL):
        V, A = ctx.saved_tensors
        if _C.is_grad_enabled():  # create_graph: V as a function of A
            V = _EigFn().apply(A)[1]
        from ._solve import solve
        gA = solve(V.mH, gL.unsqueeze(-1) * V.mH)  # V^-H diag(gL) V^H
        return _real_if(gA, A)
    return _function("LinalgEigvals", forward, backward)


_EigvalsFn = _lazy(_build_eigvals)


def eigvals(A, *, out=None):
    """The eigenvalues of a general square A, always complex."""
    _eig_check("linalg.eigvals", A)
    return _finish(_EigvalsFn().apply(A), out)
