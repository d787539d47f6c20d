"""autocast: a context manager and decorator (torch.autocast's signature)."""
import functools

from .. import _C

_state = {"enabled": False, "dtype": None}
_DEFAULT_DTYPE = {"cuda": "float16", "cpu": "bfloat16"}


class autocast:
    """Records the requested mode (is_autocast_enabled() reports it) but casts
    nothing yet: every op runs in its inputs' dtype."""

    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if device_type not in ("cuda", "cpu", "xpu", "mps", "hpu"):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self.device = device_type
        self.fast_dtype = dtype if dtype is not None else _C._dtypes[_DEFAULT_DTYPE.get(device_type, "bfloat16")]
        self._enabled = bool(enabled)
        self._prev = None

    def __enter__(self):
        self._prev = dict(_state)
        _state.update(enabled=self._enabled, dtype=self.fast_dtype)
        return self

    def __exit__(self, *exc):
        _state.update(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)
        return wrapper


def is_autocast_enabled(device_type=None):
    return _state["enabled"]


def get_autocast_dtype(device_type="cuda"):
    return _state["dtype"] or _C._dtypes[_DEFAULT_DTYPE.get(device_type, "bfloat16")]
