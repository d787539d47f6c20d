"""Functions torch defines in Python (torch.functional) because they take
variadic tensors or shapes: broadcast_shapes, broadcast_tensors, meshgrid.
The work is done in C (ember._C); these only gather the arguments."""
from . import _C

__all__ = ["broadcast_shapes", "broadcast_tensors", "meshgrid"]


def broadcast_shapes(*shapes):
    """The shape tensors of these shapes broadcast to, without making tensors.

    Each shape is an int or a sequence of ints, as torch.broadcast_shapes."""
    dims = []
    for shape in shapes:
        if isinstance(shape, int) and not isinstance(shape, bool):
            dims.append((shape,))
        elif isinstance(shape, (tuple, list)) and all(isinstance(s, int) and not isinstance(s, bool)
                                                      for s in shape):
            dims.append(tuple(shape))
        else:
            raise RuntimeError("Input shapes should be of type ints, a tuple of ints, or a list of ints, "
                               f"got {shape}")
    result = [1] * max((len(d) for d in dims), default=0)
    for index, shape in enumerate(dims):
        for i in range(-1, -1 - len(shape), -1):
            if shape[i] < 0:
                raise ValueError("Attempting to broadcast a dimension with negative length!")
            if shape[i] == 1 or shape[i] == result[i]:
                continue
            if result[i] != 1:
                raise RuntimeError(f"Attempting to broadcast a dimension of length {shape[i]} at {i}! "
                                   f"Mismatching argument at index {index} had {shape}; but expected shape "
                                   f"should be broadcastable to {result}")
            result[i] = shape[i]
    return _C.Size(result)


def broadcast_tensors(*tensors):
    """Views of the tensors expanded to their common broadcast shape."""
    return _C.broadcast_tensors(tensors)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids (views) of 0-D/1-D tensors; indexing 'ij' (the default,
    with torch's warning when not given) or 'xy'."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    return _C.meshgrid(tensors, indexing=indexing)
