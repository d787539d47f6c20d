"""parameters_to_vector / vector_to_parameters (torch.nn.utils')."""
from ... import _C

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated into one vector."""
    return _C.cat([p.view(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Slices of vec become the parameters' data, in order."""
    if not isinstance(vec, _C.Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    offset = 0
    for p in parameters:
        n = p.numel()
        p.data = vec[offset:offset + n].view_as(p).data
        offset += n
