"""Small module-level functions torch has that need no C: type queries (is_tensor, numel, typename, ...)."""
from . import _C


def _tensor_arg(fname, input):
    if not isinstance(input, _C.Tensor):
        raise TypeError(f"{fname}(): argument 'input' (position 1) must be Tensor, "
                        f"not {type(input).__name__}")
    return input


def is_tensor(obj):
    """True if obj is an ember Tensor (or a subclass such as nn.Parameter)."""
    return isinstance(obj, _C.Tensor)


def is_storage(obj):
    return isinstance(obj, _C.UntypedStorage)


def is_floating_point(input):
    return _tensor_arg("is_floating_point", input).is_floating_point()


def is_complex(input):
    """Whether the tensor holds complex numbers (complex64 or complex128)."""
    return _tensor_arg("is_complex", input).dtype.is_complex


def is_nonzero(input):
    _tensor_arg("is_nonzero", input)
    if input.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous"
                           if input.numel() else "Boolean value of Tensor with no values is ambiguous")
    return bool(input.item())


def numel(input):
    return _tensor_arg("numel", input).numel()


def typename(obj):
    """'ember.FloatTensor' for tensors, else the object's module-qualified type name."""
    if isinstance(obj, _C.Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    qualname = ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    if module in ("", "builtins"):
        return qualname
    return f"{module}.{qualname}"
