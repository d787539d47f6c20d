"""ember.nn.attention: which scaled_dot_product_attention kernels may run
(torch.nn.attention's SDPBackend and sdpa_kernel; torch.backends.cuda's
enable_*_sdp flags read and write the same switches).

F.scaled_dot_product_attention takes the first allowed kernel that fits its
inputs: the fused flash kernel (CPU, and CUDA half types), then the
memory-efficient one where ember has it, then the math (composed) path. With
none allowed that fits, it raises torch's RuntimeError."""
import contextlib
import enum

__all__ = ["SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


# the switches, all on by default as in torch
_enabled = {SDPBackend.MATH: True, SDPBackend.FLASH_ATTENTION: True, SDPBackend.EFFICIENT_ATTENTION: True,
            SDPBackend.CUDNN_ATTENTION: True, SDPBackend.OVERRIDEABLE: True}


def _allowed(backend):
    return _enabled[backend]


def _set(backend, on):
    _enabled[backend] = bool(on)


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Inside the block only `backends` (an SDPBackend or a list of them) may
    run scaled_dot_product_attention; the switches come back afterwards."""
    if not isinstance(backends, (list, SDPBackend)):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of SDPBackend instances, got "
                             f"{type(backends).__name__}")
    backends = [backends] if isinstance(backends, SDPBackend) else list(backends)
    before = dict(_enabled)
    for b in _enabled:
        _enabled[b] = b in backends
    try:
        yield {}
    finally:
        _enabled.update(before)
