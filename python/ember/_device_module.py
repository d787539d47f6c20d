"""torch.get_device_module and the deterministic debug mode, composed from what
ember has: the device module is ember.cuda (the only accelerator ember has),
and debug mode 0/1/2 is use_deterministic_algorithms off / warn only / on."""
from . import _C


def get_device_module(device=None):
    """The module of a device type: ember.cuda for 'cuda'. With no device, the
    current accelerator's (ember.cuda when a GPU is usable)."""
    from . import cuda
    if device is None:
        if _C._cuda_device_count() > 0:
            return cuda
        raise RuntimeError("get_device_module(): no accelerator is available, and ember has no torch.cpu module")
    kind = device.type if isinstance(device, _C.device) else _C.device(device).type if isinstance(device, str) \
        else None
    if kind is None:
        raise TypeError(f"get_device_module(): expected a device or a device string, got {type(device).__name__}")
    if kind == "cuda":
        return cuda
    raise RuntimeError(f"get_device_module(): ember has no device module for '{kind}'")


def get_deterministic_debug_mode():
    """0: deterministic algorithms off; 1: on, warning only; 2: on, raising."""
    import ember
    if not ember.are_deterministic_algorithms_enabled():
        return 0
    return 1 if ember.is_deterministic_algorithms_warn_only_enabled() else 2


def set_deterministic_debug_mode(debug_mode):
    import ember
    if isinstance(debug_mode, str):
        names = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in names:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got "
                               f"{debug_mode}")
        debug_mode = names[debug_mode]
    if not isinstance(debug_mode, int) or isinstance(debug_mode, bool):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    ember.use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)
