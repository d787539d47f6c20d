"""torch's shape and layout functions composed from ember ops: ravel, the
diagonal builders (diag, diag_embed, diagflat), cartesian_prod, combinations,
block_diag, vander, atleast_1d/2d/3d, unravel_index, put / Tensor.put_ and the view
scatters (select_scatter, slice_scatter, diagonal_scatter, as_strided_scatter). Views
where torch returns views; the rest are differentiable compositions."""
import builtins
import itertools
import math

from . import _C
from ._checks import _dt, _require_tensor, _type_name, _wrap_dim

_py_abs, _py_int, _py_any = builtins.abs, builtins.int, builtins.any


def ravel(input):
    """The elements as a 1-D tensor (a view when the layout allows)."""
    return _require_tensor("ravel", input).reshape(-1)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices (in dims dim1, dim2) whose `offset` diagonal holds the last dim of input."""
    _require_tensor("diag_embed", input)
    out_ndim = input.dim() + 1
    d1, d2 = _wrap_dim(dim1, out_ndim), _wrap_dim(dim2, out_ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    vec = input if input.dim() else input.reshape(1)
    n = vec.shape[-1]
    m = n + _py_abs(offset)
    if offset:  # pad the vector so the diagonal can be read off by row (or column)
        pad = _C.zeros(tuple(vec.shape[:-1]) + (_py_abs(offset),), dtype=vec.dtype, device=vec.device)
        vec = _C.cat([vec, pad], -1)
    idx = _C.arange(m, device=vec.device)
    mask = _C.eq(idx.unsqueeze(0) - idx.unsqueeze(1), offset)  # col - row == offset
    spread = vec.unsqueeze(-1) if offset >= 0 else vec.unsqueeze(-2)
    spread = spread.expand(tuple(vec.shape[:-1]) + (m, m))
    zero = _C.zeros((), dtype=vec.dtype, device=vec.device)
    out = _C.where(mask, spread, zero)
    return out.movedim((-2, -1), (d1, d2)) if (d1, d2) != (out_ndim - 2, out_ndim - 1) else out


def diag(input, diagonal=0):
    """1-D input: a square matrix with it on the `diagonal`; 2-D: that diagonal (a copy)."""
    _require_tensor("diag", input)
    if input.dim() == 1:
        return diag_embed(input, diagonal)
    if input.dim() == 2:
        return _C.diagonal(input, diagonal).clone()
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.dim()}D")


def cartesian_prod(*tensors):
    """All tuples of one element from each 1-D tensor, as rows."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        if _require_tensor("cartesian_prod", t).dim() != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    if _py_any(t.dtype != tensors[0].dtype for t in tensors):
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    grids = _C.meshgrid(list(tensors), indexing="ij")
    return _C.stack([g.reshape(-1) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The length-r combinations of a 1-D tensor's elements, as rows (itertools order)."""
    _require_tensor("combinations", input)
    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return _C.empty((0,), dtype=input.dtype)
    n = input.shape[0]
    count = math.comb(n + r - 1, r) if with_replacement else math.comb(n, r)
    if count * r > 2 ** 31:  # sized before any work: the rows would be built one by one
        raise RuntimeError(f"combinations: {count} combinations of {n} elements taken {r} at a time are too "
                           f"many to build")
    make = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(make(range(n), r))
    if not rows:
        return _C.empty((0, r), dtype=input.dtype)
    index = _C.tensor(rows, dtype=_dt("int64"))
    return input[index]


def block_diag(*tensors):
    """A block-diagonal matrix from 0-, 1- and 2-D tensors (promoted to one dtype)."""
    mats = []
    for i, t in enumerate(tensors):
        _require_tensor("block_diag", t)
        if t.dim() > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. "
                               f"Input {i} has {t.dim()} dimensions")
        mats.append(t.reshape(1, 1) if t.dim() == 0 else t.reshape(1, -1) if t.dim() == 1 else t)
    if not mats:
        return _C.empty((1, 0), dtype=_C.get_default_dtype())
    dtype = mats[0].dtype
    for t in mats[1:]:
        dtype = _C.promote_types(dtype, t.dtype)
    total_cols = _py_int(sum(t.shape[1] for t in mats))
    rows, col = [], 0
    for t in mats:
        h, w = t.shape
        parts = []
        if col:
            parts.append(_C.zeros((h, col), dtype=dtype, device=t.device))
        parts.append(t.to(dtype))
        if total_cols - col - w:
            parts.append(_C.zeros((h, total_cols - col - w), dtype=dtype, device=t.device))
        rows.append(_C.cat(parts, 1) if len(parts) > 1 else parts[0])
        col += w
    return _C.cat(rows, 0)


def vander(x, N=None, increasing=False):
    """Columns x**(N-1), ..., x**0 (increasing=True reverses); ints become int64."""
    _require_tensor("vander", x, "x")
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    base = x if x.dtype.is_floating_point else x.to(_dt("int64"))
    ones = _C.ones((x.shape[0], 1), dtype=base.dtype, device=x.device)
    if n == 0:
        return _C.empty((x.shape[0], 0), dtype=base.dtype, device=x.device)
    if n == 1:
        result = ones
    else:  # a running product, like torch, so gradients match its cumprod backward
        result = _C.cat([ones, base.unsqueeze(1).expand(x.shape[0], n - 1)], 1).cumprod(1)
    return result if increasing else result.flip(1)


def _atleast(fname, nd, tensors):
    single = len(tensors) == 1 and isinstance(tensors[0], _C.Tensor)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    results = []
    for t in tensors:
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"{fname}() received an invalid combination of arguments - got "
                            f"({type(t).__name__}), but expected one of: (Tensor input) or "
                            f"(tuple of Tensors tensors)")
        if t.dim() == 0:
            t = t.reshape([1] * nd)
        elif t.dim() < nd:
            # atleast_2d: (n,) -> (1, n); atleast_3d: (n,) -> (1, n, 1), (m, n) -> (m, n, 1)
            t = t.unsqueeze(0) if t.dim() == 1 else t
            if nd == 3 and t.dim() == 2:
                t = t.unsqueeze(-1)
        results.append(t)
    return results[0] if single else tuple(results)


def atleast_1d(*tensors):
    """Each input viewed with at least one dimension (0-d -> (1,))."""
    return _atleast("atleast_1d", 1, tensors)


def atleast_2d(*tensors):
    """Each input viewed with at least two dimensions ((n,) -> (1, n))."""
    return _atleast("atleast_2d", 2, tensors)


def atleast_3d(*tensors):
    """Each input viewed with at least three dimensions ((n,) -> (1, n, 1), (m, n) -> (m, n, 1))."""
    return _atleast("atleast_3d", 3, tensors)


def diagflat(input, offset=0):
    """A 2-D tensor with input's flattened elements on diagonal `offset`."""
    _require_tensor("diagflat", input)
    return diag(input.reshape(-1), offset)


def unravel_index(indices, shape):
    """Flat indices -> a tuple of coordinate tensors for `shape` (C order), as torch."""
    import ember
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(shape)
    if not isinstance(indices, _C.Tensor):
        indices = ember.tensor(indices)
    if indices.is_floating_point() or indices.dtype == ember.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    if any(s < 0 for s in shape):
        raise ValueError("'shape' cannot have negative values, but got " + str(shape))
    total = 1
    for s in shape:
        total *= s
    if total == 0 and indices.numel():
        raise ValueError(f"'shape' cannot have zero dimensions when 'indices' is non-empty, but got {shape}")
    # torch wraps out-of-range (and negative) indices modulo the shape's size
    flat = indices.long() % total if total else indices.long()
    coords = []
    for s in reversed(shape):
        coords.append(flat % s if s else flat)
        flat = flat // s if s else flat
    return tuple(reversed(coords))


def put_(input, index, source, accumulate=False):
    """Tensor.put_: write `source` into `input` read as a 1-D row-major tensor, at
    the flat positions `index` (negative ones count from the end); with
    `accumulate`, add instead. Through index_put_, so it is differentiable."""
    _require_tensor("put_", input)
    _require_tensor("put_", index, "index", 2)
    _require_tensor("put_", source, "source", 3)
    if index.dtype != _dt("int64"):
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {_type_name(index.dtype)}")
    if source.dtype != input.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got self.dtype = "
                           f"{_type_name(input.dtype)} and source.dtype = {_type_name(source.dtype)}")
    if source.numel() != index.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    if index.numel() == 0:
        return input
    n = input.numel()
    if n == 0:
        raise IndexError("put_(): Tried to put elements into an empty tensor")
    for bad in (index.min().item(), index.max().item()):
        if not -n <= bad < n:
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")
    idx, src = (index.reshape(-1),), source.reshape(-1)
    if input.is_contiguous():
        input.view(-1).index_put_(idx, src, accumulate)
    else:  # no flat view of a strided tensor: write through a copy
        flat = input.reshape(-1).clone()
        flat.index_put_(idx, src, accumulate)
        input.copy_(flat.view(input.shape))
    return input


def put(input, index, source, accumulate=False):
    """torch.put: put_ on a copy of input."""
    return put_(_require_tensor("put", input).clone(), index, source, accumulate)


def _embed(name, input, src, view_of):
    """A copy of input (its layout kept) whose view view_of(copy) holds src:
    differentiable to both through the in-place copy, as torch's *_scatter."""
    _require_tensor(name, input)
    _require_tensor(name, src, "src", 2)
    out = input.clone()
    view = view_of(out)
    if tuple(view.shape) != tuple(src.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(view.shape)}")
    view.copy_(src)
    return out


def select_scatter(input, src, dim, index):
    """input with input.select(dim, index) replaced by src (a new tensor)."""
    return _embed("select_scatter", input, src, lambda t: t.select(dim, index))


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """input with the slice start:end:step of dim replaced by src (a new tensor)."""
    def view(t):
        return t[(slice(None),) * _wrap_dim(dim, t.dim()) + (slice(start, end, step),)]
    return _embed("slice_scatter", input, src, view)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """input with its diagonal(offset, dim1, dim2) replaced by src (a new tensor)."""
    return _embed("diagonal_scatter", input, src, lambda t: t.diagonal(offset, dim1, dim2))


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """input with the as_strided(size, stride, storage_offset) view of its copy replaced by src."""
    return _embed("as_strided_scatter", input, src, lambda t: t.as_strided(size, stride, storage_offset))


__all__ = ["ravel", "diag", "diag_embed", "diagflat", "cartesian_prod", "combinations", "block_diag", "vander",
           "atleast_1d", "atleast_2d", "atleast_3d", "unravel_index", "put", "select_scatter", "slice_scatter",
           "diagonal_scatter", "as_strided_scatter"]
