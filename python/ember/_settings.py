"""Process-wide settings torch scripts set: the deterministic-algorithms
flags (recorded; ember's CPU kernels are deterministic already) and the
default device (only 'cpu' exists)."""
import builtins

from . import _C

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
    """The device factories build on when given none (torch's semantics:
    ``zeros``, ``tensor``, ``arange``, ... but not the ``*_like`` ones);
    ``None`` or 'cpu' restores the CPU. ``with ember.device(d):`` does the same
    for a block."""
    _C._set_default_device(device)


def get_default_device():
    """The device set by set_default_device or the innermost ``with device``."""
    return _C._get_default_device()


__all__ = ["use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_default_device", "get_default_device"]
