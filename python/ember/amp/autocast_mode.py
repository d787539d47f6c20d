"""autocast: a context manager and decorator (torch.autocast's signature).

Inside the block, ops cast their floating-point arguments on `device_type`
by torch's policy (matmuls and convolutions in `dtype`, reductions, softmax
and losses in float32): Note [autocast] in csrc/ops/autocast.c does the
casting at the op boundary; this class only switches it on and off."""
import functools
import warnings

from .. import _C

_DEVICE_TYPES = ("cuda", "cpu", "xpu", "mps", "hpu")
_SUPPORTED_DTYPES = {"cuda": ("float16", "bfloat16"), "cpu": ("bfloat16", "float16")}


class autocast:
    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if device_type not in _DEVICE_TYPES:
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self.device = device_type
        self.fast_dtype = dtype if dtype is not None else get_autocast_dtype(device_type)
        self._enabled = bool(enabled)
        self._prev = None
        if device_type not in ("cuda", "cpu"):
            self._enabled = False  # no such backend in ember
        elif str(self.fast_dtype).split(".")[-1] not in _SUPPORTED_DTYPES[device_type]:
            kind = "CUDA" if device_type == "cuda" else "CPU"
            warnings.warn(f"In {kind} autocast, but the target dtype is not supported. Disabling autocast.\n"
                          f"{kind} Autocast only supports dtype of "
                          f"{', '.join('ember.' + d for d in _SUPPORTED_DTYPES[device_type])} currently.",
                          stacklevel=2)
            self._enabled = False
        elif device_type == "cuda" and self._enabled:
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("User provided device_type of 'cuda', but CUDA is not available. Disabling",
                              stacklevel=2)
                self._enabled = False

    def __enter__(self):
        if self.device in ("cuda", "cpu"):
            self._prev = _C._set_autocast(self.device, self._enabled, self.fast_dtype)
        return self

    def __exit__(self, *exc):
        if self._prev is not None:
            _C._set_autocast(self.device, *self._prev)
            self._prev = None
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)
        return wrapper


def is_autocast_enabled(device_type=None):
    """With no argument: CUDA autocast, as torch.is_autocast_enabled()."""
    return _C._get_autocast(device_type or "cuda")[0]


def is_autocast_cpu_enabled():
    return _C._get_autocast("cpu")[0]


def get_autocast_dtype(device_type="cuda"):
    return _C._get_autocast("cuda" if device_type == "cuda" else "cpu")[1]


def get_autocast_gpu_dtype():
    return get_autocast_dtype("cuda")


def get_autocast_cpu_dtype():
    return get_autocast_dtype("cpu")
