"""ember.linalg's decompositions and solvers on LAPACK (csrc/cpu/lapack.c):
LU, Cholesky, QR, SVD, symmetric eigen, least squares, triangular solves,
and what torch builds from them (inv, det, pinv, cond, matrix_exp, ...).

The C functions _C._lapack_* take column-major copies (Note [LAPACK layout]
in lapack.c: the (..., cols, rows) tensor A.mT.contiguous()) and return
`info` per matrix; this module checks arguments the way torch does, turns
info into torch's errors, and gives the decompositions their gradients as
autograd Functions whose backward formulas are written with ember ops (so
they are differentiable again). Everything else is composed of those, so
autograd comes for free. Complex dtypes (and so eig/eigvals) do not exist in
ember; a build without LAPACK raises RuntimeError from the C functions.
"""
import collections
import math

from . import _C
from ._extra_functions import diag_embed as _diag_embed

_F32, _F64, _I32, _I64 = (_C._dtypes[n] for n in ("float32", "float64", "int32", "int64"))

# -- errors, names, checks ------------------------------------------------------------------


class LinAlgError(RuntimeError):
    """Raised for singular / not positive-definite input (torch.linalg.LinAlgError)."""


LinAlgError.__module__ = "ember.linalg"

_TYPE_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
               "int64": "Long", "float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
               "float64": "Double"}


def _tname(dtype):
    return _TYPE_NAMES[str(dtype).split(".")[-1]]


def _result_type(name, fields):
    """A named tuple registered as ember.return_types.<name> (torch.return_types)."""
    base = collections.namedtuple(name, fields)

    def __repr__(self):
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in fields)
        return f"ember.return_types.{name}({inner})"

    cls = type(name, (base,), {"__slots__": (), "__repr__": __repr__})
    cls.__module__ = "ember.return_types"
    return _C._return_types.setdefault(name, cls)


_InvEx = _result_type("linalg_inv_ex", ["inverse", "info"])
_SolveEx = _result_type("linalg_solve_ex", ["result", "info"])
_CholEx = _result_type("linalg_cholesky_ex", ["L", "info"])
_LinalgQR = _result_type("linalg_qr", ["Q", "R"])
_LinalgSVD = _result_type("linalg_svd", ["U", "S", "Vh"])
_SVD = _result_type("svd", ["U", "S", "V"])
_Eigh = _result_type("linalg_eigh", ["eigenvalues", "eigenvectors"])
_Lstsq = _result_type("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
_LUFactor = _result_type("linalg_lu_factor", ["LU", "pivots"])
_LUFactorEx = _result_type("linalg_lu_factor_ex", ["LU", "pivots", "info"])
_LU = _result_type("linalg_lu", ["P", "L", "U"])
_LUUnpack = _result_type("lu_unpack", ["P", "L", "U"])
_LinalgSlogdet = _result_type("linalg_slogdet", ["sign", "logabsdet"])
_Slogdet = _result_type("slogdet", ["sign", "logabsdet"])
_TriSolve = _result_type("triangular_solve", ["solution", "cloned_coefficient"])
_Geqrf = _result_type("geqrf", ["a", "tau"])


def _tensor(fname, x, arg="A", pos=1):
    if not isinstance(x, _C.Tensor):  # torch names the binding: linalg_inv()
        raise TypeError(f"{fname.replace('linalg.', 'linalg_')}(): argument '{arg}' (position {pos}) must be "
                        f"Tensor, not {type(x).__name__}")
    return x


def _check(fname, A, square=True, arg="A"):
    """torch's checks on a matrix argument: a tensor of >= 2 dims, float32 or
    float64, square when `square`."""
    _tensor(fname, A, arg)
    if A.dim() < 2:
        raise RuntimeError(f"{fname}: The input tensor {arg} must have at least 2 dimensions.")
    if not A.dtype.is_floating_point:
        raise NotImplementedError(f"{fname}: Expected a floating point or complex tensor as input. "
                                  f"Got {_tname(A.dtype)}")
    if A.dtype not in (_F32, _F64):
        raise NotImplementedError(f"{fname}: Low precision dtypes not supported. Got {_tname(A.dtype)}")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fname}: {arg} must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    return A


def _same_dtype(fname, A, B, a="A", b="B"):
    if A.dtype != B.dtype:
        raise RuntimeError(f"{fname}: Expected {a} and {b} to have the same dtype, but found {a} of type "
                           f"{_tname(A.dtype)} and {b} of type {_tname(B.dtype)} instead")


def _lapack_in(A):
    """A (..., m, n) as a fresh detached host copy in column-major order: the
    contiguous (..., n, m) tensor the _C._lapack_* functions overwrite."""
    x = A.detach()
    if x.device.type != "cpu":
        x = x.cpu()
    y = x.mT.contiguous()
    if y.numel() and y.data_ptr() == x.data_ptr():
        y = y.clone()
    return y


def _back(y, like):
    """A column-major result buffer (..., n, m) as the (..., m, n) matrix, on like's device."""
    r = y.mT
    return r if like.device.type == "cpu" else r.to(like.device)


def _on(t, like):
    return t if like.device.type == "cpu" else t.to(like.device)


def _first_error(info):
    """(batch index, info value) of the first matrix with info != 0, or None."""
    flat = info.reshape(-1)
    if flat.numel() == 0:
        return None
    bad = _C.nonzero(flat)
    if bad.numel() == 0:
        return None
    i = int(bad[0, 0])
    return i, int(flat[i])


def _raise_info(info, batched, message):
    """Raise LinAlgError(message(info value)) for the first failing matrix,
    with torch's '(Batch element i): ' prefix for batched input."""
    err = _first_error(info)
    if err is None:
        return
    i, v = err
    fname, text = message(v)
    prefix = f"(Batch element {i}): " if batched else ""
    raise LinAlgError(f"{fname}: {prefix}{text}")


def _eye_like(A, n=None):
    n = A.shape[-1] if n is None else n
    return _C.eye(n, dtype=A.dtype, device=A.device)


def _broadcast_batch(A, B):
    """A and B expanded to their common batch shape (all dims but the last two)."""
    batch = _broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2]))
    return A.expand(*batch, *A.shape[-2:]), B.expand(*batch, *B.shape[-2:])


def _broadcast_shapes(a, b):
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) "
                               f"at non-singleton dimension {len(out)}")
        out.append(y if x == 1 else x)
    return tuple(out)


def _finish(result, out):
    """out= for single-tensor results: written into out, whose shape and dtype must match (ember
    tensors cannot be resized in place)."""
    if out is None:
        return result
    if out.dtype != result.dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {result.dtype}, but got {out.dtype} instead")
    if tuple(out.shape) != tuple(result.shape):
        raise RuntimeError(f"the out tensor has shape {list(out.shape)}, but the result has shape "
                           f"{list(result.shape)}")
    with _nograd():
        out.copy_(result)
    return out


def _finish_tuple(result, out):
    """out= of the functions returning named tuples: a tuple of tensors, each written like _finish."""
    if out is None:
        return result
    if not isinstance(out, (tuple, list)) or len(out) != len(result):
        raise TypeError(f"out must be a tuple of {len(result)} tensors")
    vals = [_finish(r, o) for r, o in zip(result, out)]
    return type(result)(*vals) if hasattr(result, "_fields") else tuple(vals)


def _nograd():
    from .autograd.grad_mode import no_grad
    return no_grad()


def _function(name, forward, backward):
    """An autograd.Function class named `name` (its grad_fn is <name>Backward)."""
    from .autograd import Function
    return type(name, (Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})


def _lazy(builder):
    """The Function builder() makes, built on first use (autograd imports this module's package)."""
    cache = []

    def get():
        if not cache:
            cache.append(builder())
        return cache[0]
    return get


def _diag(x):
    return _C.diagonal(x, 0, -2, -1)


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
        gB = _solve_tri(A.mT, g, not upper, left, unit)
        gA = -(gB @ X.mT) if left else -(X.mT @ gB)
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
        gB = _solve(A.mT, g)
        return -(gB @ X.mT), gB, None, None
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
    """X with A X = B (A^T X = B when adjoint; X A = B when not left) from
    lu_factor's (LU, pivots). Composed of triangular solves: differentiable
    in LU and B."""
    fname = "linalg.lu_solve"
    _check(fname, LU, arg="LU")
    _check(fname, B, square=False, arg="B")
    _same_dtype(fname, LU, B, "LU")
    if not left:
        return _finish(lu_solve(LU, pivots, B.mT, left=True, adjoint=not adjoint).mT, out)
    if B.shape[-2] != LU.shape[-1]:
        raise RuntimeError(f"{fname}: Incompatible shapes of A and B for the equation AX = B "
                           f"({LU.shape[-2]}x{LU.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    P = _perm_matrix(pivots, LU.shape[-1], LU)
    if not adjoint:  # A = P L U: X = U^-1 L^-1 P^T B
        Y = _solve_tri(LU, P.mT @ B, upper=False, unit=True)
        X = _solve_tri(LU, Y, upper=True)
    else:            # A^T = U^T L^T P^T: X = P L^-T U^-T B
        Y = _solve_tri(LU.mT, B, upper=False)
        X = P @ _solve_tri(LU.mT, Y, upper=True, unit=True)
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
    sign = psign * _C.sign(d).prod(-1)
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
        A, det = ctx.saved_tensors
        if A.requires_grad and _C.is_grad_enabled():  # double backward: stay differentiable
            return g.unsqueeze(-1).unsqueeze(-1) * det.unsqueeze(-1).unsqueeze(-1) * inv(A).mT
        return g.unsqueeze(-1).unsqueeze(-1) * _cofactor(A.detach(), det.detach())
    return _function("LinalgDet", forward, backward)


_DetFn = _lazy(_build_det)


def det(A, *, out=None):
    """The determinant of square matrices (LU; 0 for singular ones)."""
    _check("linalg.det", A)
    return _finish(_DetFn().apply(A), out)


def _build_slogdet():
    def forward(ctx, A):
        sign, logabs, _ = _det_parts(A)
        ctx.save_for_backward(A)
        ctx.mark_non_differentiable(sign)
        return sign, logabs

    def backward(ctx, _gsign, g):
        A, = ctx.saved_tensors
        return g.unsqueeze(-1).unsqueeze(-1) * inv(A).mT
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
        P = _C.tril(L.mT @ _C.tril(gL))
        P = P - 0.5 * _diag_embed(_diag(P))
        S = _solve_tri(L.mT, P, upper=True)
        S = _solve_tri(L, S, upper=False, left=False)
        return 0.5 * (S + S.mT), None, None
    return _function("LinalgCholeskyEx", forward, backward)


_CholFn = _lazy(_build_cholesky)


def cholesky(A, *, upper=False, out=None):
    """L with A = L L^T (or U = L^T when upper) for symmetric positive-definite A."""
    _check("linalg.cholesky", A)
    L = _CholFn().apply(A, True, "linalg.cholesky")[0]
    return _finish(L.mT if upper else L, out)


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """(L, info): info > 0 marks matrices that are not positive-definite."""
    _check("linalg.cholesky_ex", A)
    L, info = _CholFn().apply(A, check_errors, "linalg.cholesky_ex")
    return _finish_tuple(_CholEx(L.mT if upper else L, info), out)


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
    Lo = L.mT if upper else L
    Y = _solve_tri(Lo, B, upper=False)
    return _finish(_solve_tri(Lo.mT, Y, upper=True), out)


def cholesky_inverse(L, upper=False, *, out=None):
    """A^-1 from A's Cholesky factor."""
    _check("cholesky_inverse", L, arg="A")
    return _finish(cholesky_solve(_eye_like(L).expand(L.shape), L, upper), out)


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
    """gA of A = Q R, m >= n (reduced): (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q."""
    M = R @ gR.mT - gQ.mT @ Q
    M = _C.tril(M) + _C.tril(M, -1).mT
    return _solve_tri(R.mT, gQ + Q @ M, upper=False, left=False)


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
        gX = _qr_back_tall(Q, R[..., :m], gQ + Y @ gR[..., m:].mT, gR[..., :m])
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
    """gA of A = U diag(S) Vh (reduced factors, real, distinct singular values)."""
    m, n, k = U.shape[-2], Vh.shape[-1], S.shape[-1]
    if gU is None and gVh is None:
        return (U * gS.unsqueeze(-2)) @ Vh
    V = Vh.mT
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1)          # E[i, j] = s_j^2 - s_i^2
    E = E + _C.eye(k, dtype=S.dtype, device=S.device)  # the diagonal is replaced below
    J = _C.zeros_like(E)
    if gU is not None:
        X = U.mT @ gU
        J = J + (X - X.mT) * S.unsqueeze(-2)
    if gVh is not None:
        Y = V.mT @ gVh.mT
        J = J + S.unsqueeze(-1) * (Y - Y.mT)
    J = J / E
    J = J - _diag_embed(_diag(J))
    if gS is not None:
        J = J + _diag_embed(gS)
    if m > k and gU is not None:
        gUS = gU / S.unsqueeze(-2)
        return (U @ J + gUS - U @ (U.mT @ gUS)) @ Vh
    if n > k and gVh is not None:
        gVS = gVh.mT / S.unsqueeze(-2)
        return U @ (J @ Vh + gVS.mT - (gVS.mT @ V) @ Vh)
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
        return (U * gS.unsqueeze(-2)) @ Vh
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
        L, V = ctx.saved_tensors
        n = L.shape[-1]
        inner = _C.zeros(*L.shape, n, dtype=L.dtype, device=L.device)
        if gV is not None:
            E = L.unsqueeze(-2) - L.unsqueeze(-1)
            E = E + _C.eye(n, dtype=L.dtype, device=L.device)
            inner = (V.mT @ gV) / E
            inner = inner - _diag_embed(_diag(inner))
        if gL is not None:
            inner = inner + _diag_embed(gL)
        return V @ inner @ V.mT, None
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
        return (V * gL.unsqueeze(-2)) @ V.mT, None
    return _function("LinalgEigvalsh", forward, backward)


_EigvalshFn = _lazy(_build_eigvalsh)


def eigvalsh(A, UPLO="L", *, out=None):
    """The eigenvalues of symmetric A, ascending."""
    _check("linalg.eigh", A)
    return _finish(_EigvalshFn().apply(A, _uplo(UPLO)), out)


# -- least squares (gelsd), pseudo-inverse, rank, condition number ---------------------------

def _eps(dtype):
    return 1.1920928955078125e-07 if dtype == _F32 else 2.220446049250313e-16


def lstsq(A, B, rcond=None, *, driver=None):
    """(solution, residuals, rank, singular_values) of min ||A X - B||, as torch
    reports them for `driver` (CPU default 'gelsy'); computed with gelsd, or
    as pinv(A) @ B when a gradient is needed."""
    fname = "torch.linalg.lstsq"
    _tensor("linalg.lstsq", A, "self")
    _tensor("linalg.lstsq", B, "b", 2)
    if A.dim() < 2:
        raise RuntimeError(f"{fname}: input must have at least 2 dimensions.")
    if A.dtype not in (_F32, _F64) or B.dtype not in (_F32, _F64):
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
    empty = _C.empty(0, dtype=A.dtype, device=A.device)
    full_rank = bool((rank == min(m, n)).all()) if rank.numel() else True
    if m > n and driver != "gelsy" and full_rank:
        residuals = ((A2 @ X - B2) ** 2).sum(-2)
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
        return x.unsqueeze(-1) if isinstance(x, _C.Tensor) else _C.tensor(float(x), dtype=A.dtype, device=A.device)
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
    if A.dim() < 2 or A.dtype not in (_F32, _F64):
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
        return _finish((V * inv_l.unsqueeze(-2)) @ V.mT, out)
    U, S, Vh = svd(A, full_matrices=False)
    tol = _tolerances(fname, A, atol, rtol, S[..., :1])
    keep = S > tol
    inv_s = _C.where(keep, 1 / _C.where(keep, S, _C.ones_like(S)), _C.zeros_like(S))
    return _finish((Vh.mT * inv_s.unsqueeze(-2)) @ U.mT, out)


def pinverse(input, rcond=1e-15):
    """torch.pinverse: pinv with rtol=rcond."""
    return pinv(input, rtol=rcond)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, out=None, tol=None):
    """The number of singular values (|eigenvalues| when hermitian) above max(atol, rtol * largest)."""
    fname = "linalg.matrix_rank"
    _tensor(fname, A, "input")
    if A.dim() < 2:
        raise RuntimeError("torch.linalg.matrix_rank: The input tensor input must have at least 2 dimensions.")
    if A.dtype not in (_F32, _F64):
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
    from .linalg import matrix_norm
    Ainv, info = inv_ex(A)
    r = matrix_norm(A, p) * matrix_norm(Ainv, p)
    bad = info > 0
    if bool(bad.any()):  # singular: torch reports inf
        r = _C.where(bad, _C.full_like(r, math.inf), r)
    return _finish(r, out)


# -- powers, exponential, products -----------------------------------------------------------

def matrix_power(A, n, *, out=None):
    """A^n by repeated squaring (n < 0: powers of the inverse; n = 0: the identity)."""
    fname = "linalg.matrix_power"
    _tensor(fname, A, "A")
    if A.dim() < 2:
        raise RuntimeError(f"{fname}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fname}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    if n == 0:
        return _finish(_eye_like(A).expand(A.shape).clone(), out)
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if n:
            base = base @ base
    return _finish(result if result is not A else A.clone(), out)


# Pade [13/13] coefficients of exp (Higham 2005) and the 1-norm bound under which it is accurate.
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def matrix_exp(A):
    """exp(A) by scaling and squaring with a [13/13] Pade approximant; a
    composition of ember ops (matmul, solve), so differentiable."""
    fname = "linalg.matrix_exp"
    _tensor(fname, A, "input")
    if A.dim() < 2:
        raise RuntimeError(f"{fname}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{fname}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    if not A.dtype.is_floating_point:
        raise NotImplementedError(f"{fname}: Expected a floating point or complex tensor as input. "
                                  f"Got {_tname(A.dtype)}")
    if A.numel() == 0:
        return A.clone()
    if A.shape[-1] == 1:
        return _C.exp(A)
    with _nograd():
        norm1 = _C.abs(A).sum(-2).amax(-1)  # (...,) 1-norms
        s = _C.ceil(_C.log2(norm1 / _THETA13)).clamp(min=0)
        s = _C.where(_C.isfinite(s), s, _C.zeros_like(s))
        smax = int(s.max()) if s.numel() else 0
    X = A / (2.0 ** s).to(A.dtype).unsqueeze(-1).unsqueeze(-1)
    b = _PADE13
    eye = _eye_like(A)
    X2 = X @ X
    X4 = X2 @ X2
    X6 = X4 @ X2
    U = X @ (X6 @ (b[13] * X6 + b[11] * X4 + b[9] * X2) + b[7] * X6 + b[5] * X4 + b[3] * X2 + b[1] * eye)
    V = X6 @ (b[12] * X6 + b[10] * X4 + b[8] * X2) + b[6] * X6 + b[4] * X4 + b[2] * X2 + b[0] * eye
    R = _solve(V - U, V + U)
    for i in range(smax):  # square s times: each matrix its own count
        R2 = R @ R
        R = _C.where((s > i).unsqueeze(-1).unsqueeze(-1), R2, R)
    return R


def multi_dot(tensors, *, out=None):
    """The product of matrices (the first may be a row vector, the last a column vector)."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        _tensor("multi_dot", t, "tensors")
        lo = 1 if i in (0, len(tensors) - 1) else 2
        if not lo <= t.dim() <= 2:
            if i == 0:
                msg = f"the first tensor must be 1D or 2D but got {t.dim()}D"
            elif i == len(tensors) - 1:
                msg = f"the last tensor must be 1D or 2D but got {t.dim()}D"
            else:
                msg = f"tensor {i} must be 2D but got {t.dim()}D"
            raise RuntimeError(f"multi_dot(): {msg}")
    first_vec, last_vec = tensors[0].dim() == 1, tensors[-1].dim() == 1
    mats = [tensors[0].unsqueeze(0) if first_vec else tensors[0]] + tensors[1:-1] + \
        [tensors[-1].unsqueeze(-1) if last_vec else tensors[-1]]
    for i in range(len(mats) - 1):
        if mats[i].shape[-1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} "
                               f"and {list(tensors[i + 1].shape)} cannot be multiplied")
    r = mats[0]
    for M in mats[1:]:
        r = r @ M
    if first_vec:
        r = r.squeeze(0)
    if last_vec:
        r = r.squeeze(-1)
    return _finish(r, out)


def vecdot(x, y, *, dim=-1, out=None):
    """The dot product of vectors along `dim` (inputs broadcast)."""
    _tensor("linalg.vecdot", x, "x")
    _tensor("linalg.vecdot", y, "y", 2)
    if x.dtype != y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{_tname(x.dtype)} and y of type {_tname(y.dtype)} instead")
    return _finish((x * y).sum(dim), out)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals of A's matrices (a view), as ember.diagonal with matrix defaults."""
    _tensor("linalg.diagonal", A)
    return _C.diagonal(A, offset, dim1, dim2)


def vander(x, *, N=None):
    """The Vandermonde matrix of x's last dim: columns x^0, x^1, ..., x^(N-1)."""
    _tensor("linalg.vander", x, "x")
    if x.dtype == _C._dtypes["bool"]:
        raise NotImplementedError("linalg.vander supports floating point, complex, and integer tensors, "
                                  "but got Bool")
    n = (x.shape[-1] if x.dim() else 1) if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    ones = _C.ones(*x.shape, 1, dtype=x.dtype, device=x.device)
    return _C.cat([ones, x.unsqueeze(-1).expand(*x.shape, n - 1)], -1).cumprod(-1)


def tensorinv(A, ind=2, *, out=None):
    """The inverse of A seen as a matrix (prod(shape[:ind]) x prod(shape[ind:]))."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    r, c = math.prod(rows), math.prod(cols)
    if r != c:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {c} != {r}")
    return _finish(inv(A.reshape(r, c)).reshape(*cols, *rows), out)


def tensorsolve(A, B, dims=None, *, out=None):
    """X with tensordot(A, X, X.ndim) == B."""
    if dims is not None:
        dims = [d % A.dim() for d in dims]
        keep = [d for d in range(A.dim()) if d not in dims]
        A = A.permute(*keep, *dims)
    rest = tuple(A.shape[B.dim():])
    n = B.numel()
    if math.prod(rest) != n:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {math.prod(rest)} != {n}")
    return _finish(solve(A.reshape(n, n), B.reshape(n)).reshape(*rest), out)


def _torch_norm(input, *args, **kwargs):
    """torch.norm / Tensor.norm: the C op, except p='nuc' (the sum of singular
    values), which goes to linalg.matrix_norm and its SVD."""
    p = args[0] if args else kwargs.get("p")
    if not (isinstance(p, str) and p == "nuc"):
        return _C.norm(input, *args, **kwargs)
    names = ("p", "dim", "keepdim")
    kw = dict(zip(names, args), **kwargs)
    dim = kw.get("dim")
    if dim is None:
        if input.dim() != 2:
            raise RuntimeError("linalg.matrix_norm: dim must be a 2-tuple. Got "
                               + " ".join(str(d) for d in range(input.dim())))
        dim = (-2, -1)
    from .linalg import matrix_norm
    return matrix_norm(input, "nuc", dim, kw.get("keepdim", False), dtype=kw.get("dtype"), out=kw.get("out"))


# -- what ember.linalg, ember.* and Tensor methods export ------------------------------------

LINALG = {
    "LinAlgError": LinAlgError, "inv": inv, "inv_ex": inv_ex, "det": det, "slogdet": slogdet,
    "solve": solve, "solve_ex": solve_ex, "cholesky": cholesky, "cholesky_ex": cholesky_ex, "qr": qr,
    "svd": svd, "svdvals": svdvals, "eigh": eigh, "eigvalsh": eigvalsh, "lstsq": lstsq, "pinv": pinv,
    "matrix_rank": matrix_rank, "cond": cond, "lu_factor": lu_factor, "lu_factor_ex": lu_factor_ex,
    "lu": lu, "lu_solve": lu_solve, "solve_triangular": solve_triangular, "matrix_power": matrix_power,
    "matrix_exp": matrix_exp, "multi_dot": multi_dot, "vecdot": vecdot,
    "householder_product": householder_product, "tensorinv": tensorinv, "tensorsolve": tensorsolve,
    "diagonal": diagonal, "vander": vander,
}

TORCH = {
    "inverse": inv, "det": det, "logdet": logdet, "slogdet": _torch_slogdet, "svd": _torch_svd,
    "qr": _torch_qr, "cholesky": _torch_cholesky, "cholesky_solve": cholesky_solve,
    "cholesky_inverse": cholesky_inverse, "pinverse": pinverse, "matrix_power": matrix_power,
    "matrix_exp": matrix_exp, "triangular_solve": triangular_solve, "lu_solve": _torch_lu_solve,
    "lu_unpack": lu_unpack, "norm": _torch_norm, "geqrf": geqrf,
    "orgqr": householder_product, "ormqr": ormqr, "lu": _torch_lu,
}

TENSOR_METHODS = {
    "inverse": inv, "det": det, "logdet": logdet, "slogdet": _torch_slogdet, "svd": _torch_svd,
    "qr": _torch_qr, "cholesky": _torch_cholesky, "cholesky_solve": cholesky_solve,
    "cholesky_inverse": cholesky_inverse, "pinverse": pinverse, "matrix_power": matrix_power,
    "matrix_exp": matrix_exp, "triangular_solve": triangular_solve, "lu_solve": _torch_lu_solve,
    "lu": _torch_lu, "norm": _torch_norm, "geqrf": geqrf,
    "orgqr": householder_product, "ormqr": ormqr,
}
