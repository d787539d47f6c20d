"""Argument checks and dtype names shared by the torch functions composed in
Python (_comparison.py, _shape_functions.py, _statistics.py, special.py, ...):
torch's exception types and messages for non-tensor arguments and bad dims,
torch's ScalarType names, and the no-grad / compute-in-float32 wrappers."""
import builtins

from . import _C

_py_max = builtins.max

# torch's ScalarType names, used in its error messages ("Long did not match Float").
_SCALAR_TYPE_NAMES = {
    "bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
    "int64": "Long", "float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
    "float64": "Double", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
    "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64",
}


def _dt(name):
    return _C._dtypes[name]


def _type_name(dtype):
    return _SCALAR_TYPE_NAMES[str(dtype).split(".")[-1]]


def _is_integral(dtype, include_bool=True):
    return not dtype.is_floating_point and (include_bool or dtype != _dt("bool"))


def _require_tensor(fname, value, argname="input", position=1):
    if not isinstance(value, _C.Tensor):
        raise TypeError(f"{fname}(): argument '{argname}' (position {position}) must be Tensor, "
                        f"not {type(value).__name__}")
    return value


def _wrap_dim(dim, ndim, fname=""):
    n = _py_max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n


def _to_float(x):
    """Integer/bool tensors become the default float dtype (torch's int->float ops)."""
    return x if x.dtype.is_floating_point or x.dtype.is_complex else x.to(_C.get_default_dtype())


def _low_precision(dtype):
    return dtype in (_dt("float16"), _dt("bfloat16"))


def _computed_in_float32(fn):
    """float16/bfloat16 inputs are computed in float32 and rounded once, like torch's kernels."""
    def wrapper(input, *args, **kwargs):
        if isinstance(input, _C.Tensor) and _low_precision(input.dtype):
            return fn(input.to(_dt("float32")), *args, **kwargs).to(input.dtype)
        return fn(input, *args, **kwargs)
    wrapper.__name__, wrapper.__qualname__, wrapper.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return wrapper


class _NoGrad:
    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(False)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)


def _write_out(fname, out, result):
    if tuple(out.shape) != tuple(result.shape):  # ember tensors cannot be resized in place
        raise RuntimeError(f"{fname}(): the out tensor has shape {list(out.shape)}, "
                           f"but the result has shape {list(result.shape)}")
    return out.copy_(result)


def _check_cpu(device):
    if device is not None:
        _C.empty((0,), device=device)  # raises ember's CUDA-unavailable error for 'cuda'
