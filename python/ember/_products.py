"""torch's tensor products composed from ember ops: tensordot (one matrix
product after permuting the contracted dims together), the cross products
(torch.cross and linalg.cross) and chain_matmul. All differentiable."""
import builtins
import math
import warnings

from . import _C
from ._checks import _require_tensor, _type_name, _wrap_dim, _write_out
from .functional import broadcast_shapes

_py_int, _py_min = builtins.int, builtins.min


def tensordot(a, b, dims=2, out=None):
    """Sum over the given dims of a and b (an int: last dims of a with first of b)."""
    _require_tensor("tensordot", a, "a")
    _require_tensor("tensordot", b, "b", 2)
    if isinstance(dims, _C.Tensor):
        dims = dims.item() if dims.numel() == 1 and dims.dim() == 0 else dims.tolist()
    if isinstance(dims, _py_int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > _py_min(a.dim(), b.dim()):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        dims_a, dims_b = list(range(a.dim() - dims, a.dim())), list(range(dims))
    else:
        if len(dims) != 2:
            raise RuntimeError("tensordot expects dims to be a pair of lists of dimensions")
        dims_a, dims_b = dims
        dims_a = [dims_a] if isinstance(dims_a, _py_int) else list(dims_a)
        dims_b = [dims_b] if isinstance(dims_b, _py_int) else list(dims_b)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    if a.dtype != b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    dims_a = [_wrap_dim(d, a.dim()) for d in dims_a]
    dims_b = [_wrap_dim(d, b.dim()) for d in dims_b]
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.shape[da]} in dim {da} and second has size {b.shape[db]} "
                               f"in dim {db}")
    free_a = [d for d in range(a.dim()) if d not in dims_a]
    free_b = [d for d in range(b.dim()) if d not in dims_b]
    k = math.prod(a.shape[d] for d in dims_a)
    left = a.permute(free_a + dims_a).reshape(math.prod(a.shape[d] for d in free_a), k)
    right = b.permute(dims_b + free_b).reshape(k, math.prod(b.shape[d] for d in free_b))
    result = _C.mm(left, right).reshape([a.shape[d] for d in free_a] +
                                        [b.shape[d] for d in free_b])
    if out is not None:
        if tuple(out.shape) != tuple(result.shape):  # ember tensors cannot be resized in place
            raise RuntimeError(f"tensordot(): the out tensor has shape {list(out.shape)}, "
                               f"but the result has shape {list(result.shape)}")
        return out.copy_(result)
    return result


def _cross_checked(fname, input, other, dim):
    if input.dim() != other.dim():
        raise RuntimeError(f"{fname}: inputs must have the same number of dimensions.")
    if input.dtype != other.dtype:
        raise RuntimeError(f"expected scalar type {_type_name(input.dtype)} but found {_type_name(other.dtype)}")
    d = _wrap_dim(dim, input.dim())
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"{fname}: inputs dimension {dim} must have length 3. "
                           f"Got {input.shape[d]} and {other.shape[d]}")
    a, b = _C.broadcast_tensors([input, other])
    # (a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0) along d
    a0, a1, a2 = (a.select(d, i) for i in range(3))
    b0, b1, b2 = (b.select(d, i) for i in range(3))
    return _C.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def linalg_cross(input, other, *, dim=-1, out=None):
    """Cross product of 3-vectors along dim (default: the last), broadcasting the rest."""
    _require_tensor("linalg.cross", input)
    _require_tensor("linalg.cross", other, "other", 2)
    result = _cross_checked("linalg.cross", input, other, dim)
    return result if out is None else _write_out("linalg.cross", out, result)


def cross(input, other, dim=None, *, out=None):
    """torch.cross: like linalg.cross, but without dim it takes the first dim of
    size 3 (deprecated in torch, which warns)."""
    _require_tensor("cross", input)
    _require_tensor("cross", other, "other", 2)
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease either pass the "
                      "dim explicitly or simply use torch.linalg.cross.\nThe default value of dim will change "
                      "to agree with that of linalg.cross in a future release.", UserWarning, stacklevel=2)
        if input.dim() == other.dim():
            shape = broadcast_shapes(input.shape, other.shape)
            dim = next((i for i, s in enumerate(shape) if s == 3), None)
            if dim is None:
                raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross(input, other, dim=-1 if dim is None else dim, out=out)


_warned_chain_matmul = [False]


def chain_matmul(*matrices, out=None):
    """The product of a chain of 2-D matrices, left to right (deprecated in torch
    for linalg.multi_dot, and warns once as torch does)."""
    if not _warned_chain_matmul[0]:
        _warned_chain_matmul[0] = True
        warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                      "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than "
                      "multiple parameters.", UserWarning, stacklevel=2)
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        _require_tensor("chain_matmul", m, "matrices")
        if m.dim() != 2:
            raise RuntimeError(f"Tensor dimension is {m.dim()}, expected 2 instead.")
    result = matrices[0]
    if len(matrices) == 1:
        result = result.clone()
    for i, m in enumerate(matrices[1:]):
        if matrices[i].shape[1] != m.shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(matrices[i].shape)} and "
                               f"{list(m.shape)} cannot be multiplied")
        result = result @ m
    return result if out is None else _write_out("chain_matmul", out, result)


__all__ = ["tensordot", "cross", "chain_matmul"]
