"""ember.finfo / ember.iinfo: numeric limits of the dtypes, as torch reports them."""

from . import _C

_float_params = {
    # dtype name: (bits, eps, max, smallest normal, resolution)
    "float16": (16, 2.0 ** -10, 65504.0, 2.0 ** -14, 0.001),
    "bfloat16": (16, 2.0 ** -7, 3.3895313892515355e38, 2.0 ** -126, 0.01),
    "float32": (32, 2.0 ** -23, 3.4028234663852886e38, 2.0 ** -126, 1e-06),
    "float64": (64, 2.0 ** -52, 1.7976931348623157e308, 2.0 ** -1022, 1e-15),
    # dtypes ember names but has no tensors of (Note [dtypes without tensors] in csrc/core/dtype.c)
    "float8_e4m3fn": (8, 2.0 ** -3, 448.0, 2.0 ** -6, 1.0),
    "float8_e5m2": (8, 2.0 ** -2, 57344.0, 2.0 ** -14, 1.0),
    "float8_e4m3fnuz": (8, 2.0 ** -3, 240.0, 2.0 ** -7, 1.0),
    "float8_e5m2fnuz": (8, 2.0 ** -2, 57344.0, 2.0 ** -15, 1.0),
}
# a complex dtype's limits are those of its real and imaginary parts
_complex_parts = {"complex32": "float16", "complex64": "float32", "complex128": "float64"}
_int_params = {
    "uint8": (8, 0, 255),
    "int8": (8, -128, 127),
    "int16": (16, -(2 ** 15), 2 ** 15 - 1),
    "int32": (32, -(2 ** 31), 2 ** 31 - 1),
    "int64": (64, -(2 ** 63), 2 ** 63 - 1),
    "uint16": (16, 0, 2 ** 16 - 1),
    "uint32": (32, 0, 2 ** 32 - 1),
    "uint64": (64, 0, 2 ** 64 - 1),
}


def _name_of(dtype):
    if dtype is None:
        return _C.get_default_dtype().__repr__().split(".")[-1]
    if not isinstance(dtype, _C.dtype):
        raise TypeError(f"expected an ember.dtype, got {type(dtype).__name__}")
    return repr(dtype).split(".")[-1]


class finfo:
    """Machine limits of a floating point dtype: bits, eps, max, min, tiny, resolution."""

    def __init__(self, type=None):
        name = _name_of(type)
        name = _complex_parts.get(name, name)
        if name not in _float_params:
            raise TypeError(f"finfo is not defined for integer type ember.{name}; use ember.iinfo")
        self.dtype = name
        self.bits, self.eps, self.max, self.smallest_normal, self.resolution = _float_params[name]
        self.min = -self.max
        self.tiny = self.smallest_normal

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Machine limits of an integer dtype: bits, min, max."""

    def __init__(self, type):
        name = _name_of(type)
        if name not in _int_params:
            raise TypeError(f"iinfo is not defined for floating point type ember.{name}; use ember.finfo")
        self.dtype = name
        self.bits, self.min, self.max = _int_params[name]

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


