"""p-norm distances and norm-capped slices composed from ember ops: cdist
(between the rows of two batches of matrices), dist (of a difference) and
renorm (slices whose norm exceeds a cap scaled down to it). Differentiable."""
import builtins

from . import _C
from ._autocast_policy import fp32_policy as _fp32_policy
from ._checks import _dt, _require_tensor, _type_name, _wrap_dim
from .linalg import vector_norm

_py_float = builtins.float


@_fp32_policy
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distances between each row of x1 and each row of x2 (batched)."""
    _require_tensor("cdist", x1, "x1")
    _require_tensor("cdist", x2, "x2", 2)
    for name, t in (("X1", x1), ("X2", x2)):
        if t.dim() < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {t.dim()}D")
    for name, t in (("X1", x1), ("X2", x2)):
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{_type_name(t.dtype)}")
    for t in (x1, x2):
        if t.dtype in (_dt("float16"), _dt("bfloat16")):
            raise NotImplementedError(f'"cdist" not implemented for \'{_type_name(t.dtype)}\'')
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. "
                           f"X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if x1.dtype != x2.dtype:
        raise RuntimeError(f"expected scalar type {_type_name(x1.dtype)} but found "
                           f"{_type_name(x2.dtype)}")
    rows1, rows2 = x1.shape[-2], x2.shape[-2]
    use_mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or
                         (compute_mode == "use_mm_for_euclid_dist_if_necessary" and
                          (rows1 > 25 or rows2 > 25)))
    if use_mm:  # |a|^2 + |b|^2 - 2 a.b, clamped away from 0 before the root (as torch)
        sq1 = (x1 * x1).sum(-1, keepdim=True)
        sq2 = (x2 * x2).sum(-1, keepdim=True)
        d2 = sq1 - 2 * _C.matmul(x1, x2.transpose(-2, -1)) + sq2.transpose(-2, -1)
        return d2.clamp_min(1e-30).sqrt()
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return _C._linalg_vector_norm(diff, _py_float(p), [-1])


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast)."""
    _require_tensor("dist", input)
    _require_tensor("dist", other, "other", 2)
    diff = input - other
    if not diff.dtype.is_floating_point:
        raise NotImplementedError(f"norm(): input dtype should be either floating point or "
                                  f"complex. Got {_type_name(diff.dtype)} instead.")
    return _C._linalg_vector_norm(diff, _py_float(p))


def renorm(input, p, dim, maxnorm):
    """Each slice input.select(dim, i) whose p-norm exceeds maxnorm scaled down to norm maxnorm."""
    _require_tensor("renorm", input)
    if input.dim() <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} dimensions")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                                  f"{_type_name(input.dtype)}")
    d = _wrap_dim(dim, input.dim())
    others = [i for i in builtins.range(input.dim()) if i != d]
    norm = vector_norm(input, p, dim=others, keepdim=True)
    # torch leaves slices at or under maxnorm untouched and adds 1e-7 to the divisor
    factor = _C.where(norm > maxnorm, maxnorm / (norm + 1e-7), _C.ones_like(norm))
    return input * factor


__all__ = ["cdist", "dist", "renorm"]
