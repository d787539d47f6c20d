"""ember.linalg: torch.linalg's functions, one module per family:

  _norms.py             vector_norm (a C reduction op), matrix_norm, norm
  _solve.py             triangular solves and the LU family: solve, inv, lu_factor, lu, lu_solve, det, slogdet
  _cholesky.py          cholesky, cholesky_ex (and torch's cholesky_solve / cholesky_inverse)
  _qr.py                qr, householder_product (and torch's geqrf / ormqr)
  _spectral.py          svd, svdvals, eigh, eigvalsh, eig, eigvals
  _least_squares.py     lstsq, pinv, matrix_rank, cond
  _matrix_functions.py  matrix_power, matrix_exp, multi_dot, vecdot, diagonal, vander, tensorinv, tensorsolve
  _lapack.py            what the LAPACK-backed ones share (csrc/ops/lapack.c): errors, result types, checks

matmul is the C op; cross is ember/_products.py's.
"""
from .._C import matmul  # noqa: F401
from .._products import linalg_cross as cross  # noqa: F401
from . import _cholesky, _least_squares, _norms, _qr, _solve, _spectral
from ._cholesky import cholesky, cholesky_ex  # noqa: F401
from ._lapack import LinAlgError  # noqa: F401
from ._least_squares import cond, lstsq, matrix_rank, pinv  # noqa: F401
from ._matrix_functions import (diagonal, matrix_exp, matrix_power, multi_dot, tensorinv,  # noqa: F401
                                tensorsolve, vander, vecdot)
from ._norms import matrix_norm, norm, vector_norm  # noqa: F401
from ._qr import householder_product, qr  # noqa: F401
from ._solve import (det, inv, inv_ex, lu, lu_factor, lu_factor_ex, lu_solve, slogdet, solve,  # noqa: F401
                     solve_ex, solve_triangular)
from ._spectral import eig, eigh, eigvals, eigvalsh, svd, svdvals  # noqa: F401

# torch.* functions of these families (ember/__init__.py exports them; Tensor methods: ember/_tensor_methods.py)
_TORCH_FUNCTIONS = {
    "inverse": inv, "det": det, "logdet": _solve.logdet, "slogdet": _solve._torch_slogdet, "svd": _spectral._torch_svd,
    "qr": _qr._torch_qr, "cholesky": _cholesky._torch_cholesky, "cholesky_solve": _cholesky.cholesky_solve,
    "cholesky_inverse": _cholesky.cholesky_inverse, "pinverse": _least_squares.pinverse, "matrix_power": matrix_power,
    "matrix_exp": matrix_exp, "triangular_solve": _solve.triangular_solve, "lu_solve": _solve._torch_lu_solve,
    "lu_unpack": _solve.lu_unpack, "norm": _norms._torch_norm, "geqrf": _qr.geqrf,
    "orgqr": householder_product, "ormqr": _qr.ormqr, "lu": _solve._torch_lu,
}
