"""Small module-level functions torch has that need no C: type queries."""
from . import _C


def is_tensor(obj):
    """True if obj is an ember Tensor (or a subclass such as nn.Parameter)."""
    return isinstance(obj, _C.Tensor)


def is_storage(obj):
    return isinstance(obj, _C.UntypedStorage)


def is_floating_point(input):
    return input.is_floating_point()


def is_nonzero(input):
    if input.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous"
                           if input.numel() else "Boolean value of Tensor with no values is ambiguous")
    return bool(input.item())


def numel(input):
    return input.numel()

