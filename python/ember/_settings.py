"""Process-wide settings torch scripts set: the deterministic-algorithms
flags (recorded; ember's CPU kernels are deterministic already) and the
default device (only 'cpu' exists)."""
import builtins

from . import _C
from ._checks import _check_cpu

_py_bool = builtins.bool


_deterministic = {"enabled": False, "warn_only": False}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Record the flag; ember's CPU kernels are deterministic already."""
    if not isinstance(mode, _py_bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' (position 1) must be "
                        f"bool, not {type(mode).__name__}")
    _deterministic["enabled"] = mode
    _deterministic["warn_only"] = _py_bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _deterministic["enabled"]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic["warn_only"]


def set_default_device(device):
    """Only 'cpu' exists; 'cuda' raises ember's CUDA-unavailable error."""
    if device is not None:
        _check_cpu(device)


def get_default_device():
    return _C.device("cpu")


__all__ = ["use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_default_device", "get_default_device"]
