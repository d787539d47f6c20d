"""torch.accelerator: the device-agnostic view of the machine's accelerator.
ember's only accelerator is CUDA (ember._cuda); without a usable GPU there is
none, and current_accelerator() answers None as torch does on a CPU machine."""
from . import _C

__all__ = ["current_accelerator", "is_available", "device_count", "current_device_index", "set_device_index",
           "current_device_idx", "set_device_idx", "synchronize", "current_stream"]


def is_available():
    return _C._cuda_device_count() > 0


def device_count():
    return _C._cuda_device_count()


def current_accelerator(check_available=False):
    """ember.device('cuda') when a GPU can be used, else None."""
    if _C._cuda_device_count() > 0:
        return _C.device("cuda")
    return None


def _require(what):
    if not is_available():
        raise RuntimeError(f"torch.accelerator.{what}(): no accelerator is available (ember found no usable GPU)")


def current_device_index():
    _require("current_device_index")
    return _C._cuda_current_device()


current_device_idx = current_device_index


def set_device_index(device):
    _require("set_device_index")
    from . import cuda
    cuda.set_device(device)


set_device_idx = set_device_index


def synchronize(device=None):
    _require("synchronize")
    from . import cuda
    cuda.synchronize(device)


def current_stream(device=None):
    _require("current_stream")
    from . import cuda
    return cuda.current_stream(device)
