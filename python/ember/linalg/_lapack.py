"""What ember.linalg's LAPACK-backed functions share: LinAlgError, the
named-tuple result types, torch's argument checks, the calling convention of
the C functions _C._lapack_* and the autograd Function helpers.

The C functions (csrc/ops/lapack.c) take column-major copies (Note [LAPACK
layout] in lapack.c: the (..., cols, rows) tensor A.mT.contiguous()) and
return `info` per matrix; the modules of this package check arguments the way
torch does, turn info into torch's errors, and give the decompositions their
gradients as autograd Functions whose backward formulas are written with
ember ops (so they are differentiable again). Complex matrices go to the
c/z routines; their backward formulas are the real ones with conjugate
transposes (mH), plus the phase terms of the SVD and eig. A build without LAPACK
raises RuntimeError from the C functions.
"""
import collections

from .. import _C
from .._checks import _SCALAR_TYPE_NAMES as _TYPE_NAMES

_F32, _F64, _I32, _I64 = (_C._dtypes[n] for n in ("float32", "float64", "int32", "int64"))

# -- errors, names, checks ------------------------------------------------------------------


class LinAlgError(RuntimeError):
    """Raised for singular / not positive-definite input (torch.linalg.LinAlgError)."""


LinAlgError.__module__ = "ember.linalg"



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
_Eig = _result_type("linalg_eig", ["eigenvalues", "eigenvectors"])
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
    """torch's checks on a matrix argument: a tensor of >= 2 dims, float32,
    float64, complex64 or complex128, square when `square`."""
    _tensor(fname, A, arg)
    if A.dim() < 2:
        raise RuntimeError(f"{fname}: The input tensor {arg} must have at least 2 dimensions.")
    if A.dtype.is_complex:
        if square and A.shape[-1] != A.shape[-2]:
            raise RuntimeError(f"{fname}: {arg} must be batches of square matrices, but they are "
                               f"{A.shape[-2]} by {A.shape[-1]} matrices")
        return A
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
    from ..autograd.grad_mode import no_grad
    return no_grad()


def _function(name, forward, backward):
    """An autograd.Function class named `name` (its grad_fn is <name>Backward)."""
    from ..autograd import Function
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


def _conj(x):
    """conj for complex tensors, x itself for real ones (no copy)."""
    return _C.conj(x) if x.dtype.is_complex else x
