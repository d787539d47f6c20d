"""torch's legacy typed tensor classes: ember.FloatTensor, ember.LongTensor, ...
and ember.cuda.FloatTensor, .... They are not tensor types of their own (as in
torch): `isinstance(t, ember.LongTensor)` asks for an int64 tensor on the CPU,
and calling one builds a tensor of its dtype — `LongTensor(2, 3)` uninitialised
of that shape, `LongTensor([1, 2])` from data, `LongTensor()` empty."""
from . import _C

_NAMES = {
    "DoubleTensor": "float64", "FloatTensor": "float32", "HalfTensor": "float16", "BFloat16Tensor": "bfloat16",
    "LongTensor": "int64", "IntTensor": "int32", "ShortTensor": "int16", "CharTensor": "int8",
    "ByteTensor": "uint8", "BoolTensor": "bool", "ComplexFloatTensor": "complex64",
    "ComplexDoubleTensor": "complex128",
}


class tensortype(type):
    """The metaclass: instance checks and construction by dtype and device type."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, _C.Tensor) and obj.dtype is cls.dtype and obj.device.type == cls._device_type

    def __call__(cls, *args, device=None):
        if device is not None and _C.device(device).type != cls._device_type:
            raise RuntimeError(f"legacy constructor expects device type: {cls._device_type} but device type: "
                               f"{_C.device(device).type} was passed")
        dev = cls._device_type
        if not args:
            return _C.empty(0, dtype=cls.dtype, device=dev)
        if all(type(a) is int or (hasattr(a, "__index__") and not isinstance(a, (_C.Tensor, float)))
               for a in args) and not any(isinstance(a, bool) for a in args):
            return _C.empty([int(a) for a in args], dtype=cls.dtype, device=dev)
        if len(args) == 1 and isinstance(args[0], _C.Size):
            return _C.empty(tuple(args[0]), dtype=cls.dtype, device=dev)
        if len(args) == 1 and isinstance(args[0], _C.Tensor):
            t = args[0]
            if t.dtype is not cls.dtype or t.device.type != dev:
                raise TypeError(f"expected {cls.__module__}.{cls.__name__} (a tensor of dtype {cls.dtype} on {dev}), "
                                f"got a tensor of dtype {t.dtype} on {t.device}")
            return t.detach()  # the same data, as torch's legacy constructor returns an alias
        if len(args) == 1:
            return _C.tensor(args[0], dtype=cls.dtype, device=dev)
        raise TypeError(f"{cls.__name__}(): expected sizes (ints), a Size, a tensor or a sequence of data, got "
                        f"({', '.join(type(a).__name__ for a in args)})")

    def __repr__(cls):
        return f"<class '{cls.__module__}.{cls.__name__}'>"


def _make(module, device_type):
    out = {}
    for name, dt in _NAMES.items():
        out[name] = tensortype(name, (), {"dtype": _C._dtypes[dt], "_device_type": device_type,
                                          "is_cuda": device_type == "cuda", "is_sparse": False,
                                          "__module__": module})
    return out


CPU_TYPES = _make("ember", "cpu")
CUDA_TYPES = _make("ember.cuda", "cuda")
