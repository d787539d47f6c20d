"""parametrizations.orthogonal: module.<name> kept an orthogonal matrix (or a
batch of them) as the image of an unconstrained tensor under the matrix
exponential, the Cayley map or a product of Householder reflections
(torch.nn.utils.parametrizations.orthogonal).

The pieces torch takes from LAPACK are written here with ember ops: the
matrix exponential (scaling and squaring of a Taylor series; differentiable
through the matmuls), the Householder product (differentiable), and the QR
decomposition with a positive diagonal of R (Householder reflections with
LAPACK's geqrf conventions, used without gradients when (re)setting the
weight). The Cayley map solves a linear system and so needs linalg.solve.
"""
import math

from ... import _C
from ..._dtype_info import finfo
from ...autograd.grad_mode import no_grad
from ..modules.module import Module

_MAPS = ("matrix_exp", "cayley", "householder")


def _eye_like(X, n, k):
    """The n x k identity, broadcast to X's batch dims."""
    e = _C.eye(n, k, dtype=X.dtype, device=X.device)
    return e.expand(*X.shape[:-2], n, k) if X.dim() > 2 else e


def _matrix_exp(A):
    """exp(A) for square A [..., n, n]: A scaled by 2^-s to norm <= 1/2, a degree-18
    Taylor series (error below 1e-20 there), then squared s times."""
    with no_grad():
        norm = float(A.detach().abs().sum(-2).max()) if A.numel() else 0.0  # the induced 1-norm
    s = max(0, int(math.ceil(math.log2(norm))) + 1) if norm > 0.5 else 0
    B = A / (2.0 ** s)
    n = A.shape[-1]
    eye = _eye_like(A, n, n)
    term, result = eye, eye
    for i in range(1, 19):
        term = term @ B / i
        result = result + term
    for _ in range(s):
        result = result @ result
    return result


def _householder_product(A, tau):
    """H_1 H_2 ... H_k applied to the first k columns of the identity, H_i = I - tau_i v_i v_i^T,
    v_i = (0, ..., 0, 1, A[i+1:, i]) -- LAPACK's orgqr. A [..., n, k], tau [..., k]."""
    n, k = A.shape[-2], A.shape[-1]
    eye = _eye_like(A, n, n)
    V = A.tril(-1) + eye[..., :k]  # column i is v_i
    M = eye[..., :k]
    for i in range(k - 1, -1, -1):
        v = V[..., i:i + 1]  # [..., n, 1]
        t = tau[..., i:i + 1].unsqueeze(-1)  # [..., 1, 1]
        M = M - (t * v) @ (v.mT @ M)
    return M


def _geqrf(Q):
    """LAPACK's geqrf of a tall Q [..., n, k]: R on and above the diagonal, the
    Householder vectors (unit first entry implied) below it, and their tau."""
    A = Q.clone()
    k = A.shape[-1]
    tau = _C.zeros(*A.shape[:-2], k, dtype=A.dtype, device=A.device)
    for i in range(k):
        x = A[..., i:, i].clone()  # [..., n - i]
        alpha = x[..., 0]
        tail = (x[..., 1:] ** 2).sum(-1)
        norm = (alpha ** 2 + tail).sqrt()
        reflect = tail > 0  # dlarfg: no reflection (tau = 0) when the tail is already zero
        beta = _C.where(reflect, -_C.where(alpha >= 0, norm, -norm), alpha)
        t = _C.where(reflect, (beta - alpha) / beta, _C.zeros_like(beta))
        scale = _C.where(reflect, 1.0 / (alpha - beta), _C.zeros_like(beta))
        v = _C.cat([_C.ones_like(alpha).unsqueeze(-1), x[..., 1:] * scale.unsqueeze(-1)], -1)  # [..., n - i]
        # apply H = I - t v v^T to the trailing columns
        sub = A[..., i:, i:]
        w = (v.unsqueeze(-1) * sub).sum(-2)  # v^T sub: [..., k - i]
        sub.sub_(t.unsqueeze(-1).unsqueeze(-1) * v.unsqueeze(-1) * w.unsqueeze(-2))
        A[..., i, i] = beta
        A[..., i + 1:, i] = v[..., 1:]
        tau[..., i] = t
    return A, tau


def _make_orthogonal(A):
    """The Q of A's QR decomposition with R's diagonal positive (unique for full rank)."""
    X, tau = _geqrf(A)
    Q = _householder_product(X, tau)
    return Q * X.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


def _is_orthogonal(Q, eps=None):
    n, k = Q.shape[-2], Q.shape[-1]
    eps = 10 * n * finfo(Q.dtype).eps if eps is None else eps
    return bool(((Q.mT @ Q - _eye_like(Q, k, k)).abs() <= eps).all())


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        # X is tall: n >= k
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            # the lower triangle (n k - k(k-1)/2 numbers) as a skew-symmetric n x n matrix
            X = X.tril()
            if n != k:
                X = _C.cat([X, X.new_zeros(*X.shape[:-2], n, n - k)], -1)
            A = X - X.mT
            if self.orthogonal_map == "matrix_exp":
                Q = _matrix_exp(A)
            else:
                from ... import linalg
                if not hasattr(linalg, "solve"):
                    raise RuntimeError("orthogonal_map='cayley' needs ember.linalg.solve, which this build of "
                                       "ember does not have; use 'matrix_exp' or 'householder'")
                eye = _eye_like(A, n, n)
                Q = linalg.solve(eye - A / 2, eye + A / 2)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(-2))
            Q = _householder_product(A, tau)
            # X's diagonal holds the signs (+-1) of the columns, not differentiated
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if getattr(self, "base", None) is not None:
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        with no_grad():
            if Q.shape != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. Got a tensor of "
                                 f"shape {Q.shape}.")
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if "base" not in self._buffers:
                if self.orthogonal_map in ("matrix_exp", "cayley"):
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the "
                                              "Cayley parametrizations when use_trivialization=False.")
                # the Householder vectors of Q's QR, with R's signs on the diagonal
                A, tau = _geqrf(Q)
                d = A.diagonal(dim1=-2, dim2=-1)
                d.copy_(_C.where(tau == 0, -d.sign(), d.sign()))
                return A.mT if transpose else A
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:  # complete Q to an n x n orthogonal matrix with random columns
                N = _C.randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(_C.cat([Q, N], -1))
            self.base = Q
            # -Id: every map sends it to the identity, so the weight starts at base
            neg_id = _C.zeros_like(Q_init)
            neg_id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_id


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Keep module.<name> (a matrix or batch of matrices) orthogonal: Q^T Q = I for
    tall ones, Q Q^T = I for wide ones. orthogonal_map: 'matrix_exp' (default for
    square), 'householder' (default otherwise) or 'cayley'. With use_trivialization
    the weight starts at its own orthogonalisation (stored in the buffer `base`)."""
    from .parametrize import register_parametrization
    weight = getattr(module, name, None)
    if not isinstance(weight, _C.Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    if orthogonal_map not in _MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    register_parametrization(module, name, _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization),
                             unsafe=True)
    return module
