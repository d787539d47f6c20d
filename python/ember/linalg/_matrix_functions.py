"""ember.linalg's matrix functions and products composed of ember ops (so
differentiable): matrix_power, matrix_exp, multi_dot, vecdot, diagonal,
vander, tensorinv and tensorsolve."""
import math

from .. import _C
from ._lapack import _eye_like, _finish, _nograd, _tensor, _tname
from ._solve import _solve, inv, solve


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
    if not (A.dtype.is_floating_point or A.dtype.is_complex):
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
