"""ember.linalg's norms: vector_norm (the C reduction op, csrc/ops/reduce.c),
matrix_norm and norm over it (the nuclear and spectral norms from the
singular values), and torch.norm / Tensor.norm's p='nuc' case."""
import math as _math

from .. import _C
from ._lapack import _finish, _tname
from ._spectral import svdvals

vector_norm = _C._linalg_vector_norm


def _norm_dims(dim, ndim):
    """dim as a tuple of non-negative ints (wrapped the way the C ops do)."""
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {d})")
        out.append(d % max(ndim, 1))
    return tuple(out)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """Matrix norms over the two dims in `dim`: 'fro', 'nuc', 1, -1, 2, -2, inf, -inf."""
    if not isinstance(A, _C.Tensor):
        raise TypeError(f"linalg.matrix_norm(): argument 'A' must be Tensor, not {type(A).__name__}")
    if A.dim() < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    dims = _norm_dims(dim, A.dim())
    if len(dims) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {' '.join(map(str, dim))}")
    if dims[0] == dims[1]:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dims[0]}, {dims[1]})")
    if ord == "fro":
        return vector_norm(A, 2, dims, keepdim, dtype=dtype, out=out)
    if ord in ("nuc", 2, -2):  # from the singular values (_spectral.svdvals)
        if not (A.is_floating_point() or A.is_complex()):
            raise NotImplementedError(f"linalg.matrix_norm: Expected a floating point or complex tensor as "
                                      f"input. Got {_tname(A.dtype)}")
        x = A if dtype is None else A.to(dtype)
        S = svdvals(_C.movedim(x, dims, (-2, -1)))
        r = S.sum(-1) if ord == "nuc" else (S.amax(-1) if ord == 2 else S.amin(-1))
        if keepdim:
            for d in sorted(dims):
                r = r.unsqueeze(d)
        return _finish(r, out)
    if isinstance(ord, str) or ord not in (1, -1, _math.inf, -_math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if not (A.is_floating_point() or A.is_complex()):
        raise NotImplementedError(f"linalg.matrix_norm: Expected a floating point or complex tensor as "
                                  f"input. Got {str(A.dtype).split('.')[-1].capitalize()}")
    # ord 1: the largest column sum (sum over rows, dims[0]); inf: the largest row sum
    inner, outer = (dims[0], dims[1]) if abs(ord) == 1 else (dims[1], dims[0])
    x = A if dtype is None else A.to(dtype)  # |z| of complex entries: the sums are real
    s = _C.sum(_C.abs(x), inner, keepdim)
    if not keepdim and inner < outer:
        outer -= 1
    if ord > 0 and s.shape[outer] == 0:  # the max of no (non-negative) sums: 0, as torch
        return _C.sum(s, outer, keepdim, out=out)
    pick = _C.amax if ord > 0 else _C.amin
    return pick(s, outer, keepdim, out=out)


def norm(A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):
    """A vector norm (ord a number, one dim or a flattened input) or a matrix
    norm (two dims, or a 2-D input with ord given)."""
    if not isinstance(A, _C.Tensor):
        raise TypeError(f"linalg.norm(): argument 'A' must be Tensor, not {type(A).__name__}")
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            if isinstance(ord, str):
                raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 2. Got [{dims[0]}]")
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
        if len(dims) != 2:
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
        return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype, out=out)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype, out=out)
    if A.dim() not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                           f"Got {A.dim()}D.")
    if A.dim() == 1:
        if isinstance(ord, str):
            raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
        return vector_norm(A, ord, None, keepdim, dtype=dtype, out=out)
    return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype, out=out)


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
    return matrix_norm(input, "nuc", dim, kw.get("keepdim", False), dtype=kw.get("dtype"), out=kw.get("out"))
