"""torch's alternative spellings of existing ember functions, and a few small Tensor helpers.

torch keeps NumPy-style names (arccos, multiply, greater_equal, ...) next to its own; scripts
use both. Each alias is the very same ember function (same signature, same autograd node),
bound under the other name as a torch.* function, a Tensor method and its in-place `_` twin.
"""
from . import _C

# alias -> ember name (torch.* function, Tensor method and in-place method)
ALIASES = {
    "arccos": "acos", "arccosh": "acosh", "arcsin": "asin", "arcsinh": "asinh", "arctan": "atan",
    "arctanh": "atanh", "arctan2": "atan2", "divide": "div", "multiply": "mul", "subtract": "sub",
    "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le", "not_equal": "ne",
}


def _functions():
    import ember
    out = {}
    for alias, name in ALIASES.items():
        if not hasattr(ember, alias):
            out[alias] = getattr(ember, name)
    return out


def _methods():
    out = {}
    for alias, name in ALIASES.items():
        for suffix in ("", "_"):
            if not hasattr(_C.Tensor, alias + suffix) and hasattr(_C.Tensor, name + suffix):
                out[alias + suffix] = getattr(_C.Tensor, name + suffix)
    out.update(is_same_size=is_same_size, split_with_sizes=split_with_sizes, fill_diagonal_=fill_diagonal_)
    return out


def is_same_size(self, other):
    if not isinstance(other, _C.Tensor):
        raise TypeError(f"is_same_size(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}")
    return tuple(self.shape) == tuple(other.shape)


def split_with_sizes(self, split_sizes, dim=0):
    """split() with a list of sizes that must add up to the dim's size."""
    return self.split(list(split_sizes), dim)


def fill_diagonal_(self, fill_value, wrap=False):
    """Write fill_value on the main diagonal (all dims equal, or a tall 2-d matrix whose
    diagonal restarts every ncols + 1 rows when wrap=True), in place."""
    if self.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    n = self.shape[0]
    if self.dim() > 2 and any(s != n for s in self.shape):
        raise RuntimeError("all dimensions of input must be of equal length")
    if self.numel() == 0:
        return self
    strides = self.stride()
    step = sum(strides)  # one element down every dim at once
    count = min(self.shape)
    if self.dim() == 2 and wrap and self.shape[0] > self.shape[1] + 1:
        # torch: the diagonal continues after a skipped row, i.e. every (ncols + 1) rows
        rows, cols = self.shape
        count = len(range(0, rows * cols, (cols + 1))) if strides == (cols, 1) else count
    diag = self.as_strided((count,), (step,), self.storage_offset())
    diag.fill_(fill_value)
    return self


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


FUNCTIONS = {"unravel_index": unravel_index}
