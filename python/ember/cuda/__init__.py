"""ember.cuda: devices, memory, streams and events of the GPU backend.

The backend (ember._cuda, built when nvcc was found) is loaded by the core at
the first CUDA request (Note [CUDA backend] in csrc/cuda_backend.h). Without
it, or without a GPU and driver, `is_available()` is False and anything that
needs a GPU raises RuntimeError saying why; nothing here fails at import.
"""
from .. import _C

__all__ = [
    "is_available", "device_count", "current_device", "set_device", "device", "device_of",
    "synchronize", "get_device_name", "get_device_capability", "get_device_properties",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
    "set_rng_state", "get_rng_state_all", "set_rng_state_all", "memory_allocated", "memory_summary", "mem_get_info",
    "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_stats",
    "reset_peak_memory_stats", "reset_max_memory_allocated", "empty_cache", "is_bf16_supported",
    "is_initialized", "init", "Stream", "Event", "current_stream", "default_stream", "stream",
    "StreamContext", "set_stream", "amp",
]


def is_available():
    """True when ember._cuda is built and at least one GPU can be used."""
    return _C._cuda_device_count() > 0


def device_count():
    return _C._cuda_device_count()


def is_initialized():
    return _C._cuda_device_count() > 0


def init():
    """Load the backend now (it loads itself at first use); raises without a GPU."""
    _C._cuda_current_device()


def current_device():
    return _C._cuda_current_device()


def _index(device):
    """A CUDA ordinal from None / int / 'cuda:1' / ember.device."""
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    d = _C.device(device)
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {device}")
    return current_device() if d.index is None else d.index


def set_device(device):
    index = _index(device)
    if index >= 0:
        _C._cuda_set_device(index)


class device:
    """Context manager that makes `device` the current GPU, restoring the old one on exit."""

    def __init__(self, device):
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = current_device()
            if self.prev_idx != self.idx:
                _C._cuda_set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev_idx != self.idx:
            _C._cuda_set_device(self.prev_idx)
        return False


class device_of(device):
    """device(tensor.device) for a CUDA tensor, a no-op for a CPU one."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_cuda else None)


def synchronize(device=None):
    """Wait until all work queued on the device has finished."""
    _C._cuda_synchronize(_index(device))


class _CudaDeviceProperties:
    def __init__(self, props):
        self.name = props["name"]
        self.total_memory = props["total_memory"]
        self.major = props["major"]
        self.minor = props["minor"]
        self.multi_processor_count = props["multi_processor_count"]
        self.L2_cache_size = props["L2_cache_size"]
        self.warp_size = props["warp_size"]

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count}, L2_cache_size={self.L2_cache_size // (1024 * 1024)}MB)")


def get_device_properties(device=None):
    return _CudaDeviceProperties(_C._cuda_device_properties(_index(device)))


def get_device_name(device=None):
    return get_device_properties(device).name


def get_device_capability(device=None):
    p = get_device_properties(device)
    return (p.major, p.minor)


def is_bf16_supported(including_emulation=True):
    """bfloat16 needs compute capability 8.0 (Ampere) or newer."""
    return is_available() and get_device_capability()[0] >= 8


# -- random numbers ---------------------------------------------------------------------
# Note [GPU random numbers]: each GPU has a Philox generator (a seed and the
# offset of its next launch); ember.manual_seed seeds these too, as torch's does.

def manual_seed(seed):
    """Seed the current GPU's generator (a no-op without a GPU, as torch)."""
    if is_available():
        _C._cuda_generator(current_device(), int(seed))


def manual_seed_all(seed):
    _C._cuda_seed_all_lazily(int(seed))


def seed():
    import random as _random
    manual_seed(_random.getrandbits(63))


def seed_all():
    import random as _random
    manual_seed_all(_random.getrandbits(63))


def initial_seed():
    return _C._cuda_generator(current_device())[0]


def get_rng_state(device="cuda"):
    """The generator's (seed, offset) as 16 uint8 values, as a CPU tensor."""
    import struct
    s, off = _C._cuda_generator(_index(device))
    return _C.tensor(list(struct.pack("<QQ", s, off)), dtype=_C._dtypes["uint8"])


def set_rng_state(new_state, device="cuda"):
    import struct
    raw = bytes(new_state.tolist())
    if len(raw) != 16:
        raise RuntimeError(f"set_rng_state: expected a state of 16 bytes, got {len(raw)}")
    s, off = struct.unpack("<QQ", raw)
    index = _index(device)
    _C._cuda_generator(index, s, off)


def get_rng_state_all():
    """Every device's generator state, in device order."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


# -- memory -----------------------------------------------------------------------------

def memory_stats(device=None):
    if not is_available():
        return {}
    return _C._cuda_memory_stats(_index(device))


def _stat(name, device):
    return memory_stats(device).get(name, 0)


def memory_allocated(device=None):
    return _stat("allocated_bytes.all.current", device)


def max_memory_allocated(device=None):
    return _stat("allocated_bytes.all.peak", device)


def memory_reserved(device=None):
    return _stat("reserved_bytes.all.current", device)


def max_memory_reserved(device=None):
    return _stat("reserved_bytes.all.peak", device)


def reset_peak_memory_stats(device=None):
    if is_available():
        _C._cuda_reset_peak_memory_stats(_index(device))


reset_max_memory_allocated = reset_peak_memory_stats


def mem_get_info(device=None):
    """(free, total) bytes of the device's memory, as the driver reports them
    (cudaMemGetInfo): the caching allocator's reserved blocks count as used."""
    if not is_available():
        raise RuntimeError("ember.cuda.mem_get_info: no CUDA GPU is available")
    return _C._cuda_mem_get_info(_index(device))


def _fmt_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def memory_summary(device=None, abbreviated=False):
    """The caching allocator's statistics for a device (memory_stats()), as
    a table to print."""
    stats = memory_stats(device)
    index = _index(device) if is_available() else 0
    rows = [("Allocated memory", "allocated_bytes.all.current", "allocated_bytes.all.peak"),
            ("Reserved memory", "reserved_bytes.all.current", "reserved_bytes.all.peak")]
    width = 60
    lines = ["=" * width, f" ember.cuda memory summary, device {index}".ljust(width), "-" * width,
             f"{'':<22}{'current':>18}{'peak':>18}", "-" * width]
    for label, cur, peak in rows:
        lines.append(f"{label:<22}{_fmt_bytes(stats.get(cur, 0)):>18}{_fmt_bytes(stats.get(peak, 0)):>18}")
    if not abbreviated:
        lines.append("-" * width)
        lines.append(f"{'cudaMalloc retries':<22}{stats.get('num_alloc_retries', 0):>18}")
        lines.append(f"{'out-of-memory errors':<22}{stats.get('num_ooms', 0):>18}")
    lines.append("=" * width)
    return "\n".join(lines) + "\n"


def empty_cache():
    """Give the cached, unused GPU blocks back to the driver."""
    _C._cuda_empty_cache()


# -- streams and events -----------------------------------------------------------------

class Stream:
    """A CUDA stream: work queued on it runs in order, and may overlap other streams."""

    def __init__(self, device=None, priority=0, _handle=None):
        self.device_index = _index(device)
        self._owned = _handle is None
        self.cuda_stream = _C._cuda_stream_new(self.device_index, priority) if _handle is None else _handle

    @property
    def device(self):
        return _C.device("cuda", self.device_index)

    def synchronize(self):
        _C._cuda_stream("synchronize", self.device_index, self.cuda_stream)

    def query(self):
        return _C._cuda_stream("query", self.device_index, self.cuda_stream)

    def wait_event(self, event):
        _C._cuda_stream("wait_event", self.device_index, self.cuda_stream, event._handle)

    def wait_stream(self, stream):
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and (self.cuda_stream, self.device_index) == \
            (other.cuda_stream, other.device_index)

    def __hash__(self):
        return hash((self.cuda_stream, self.device_index))

    def __repr__(self):
        return f"<ember.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.cuda_stream:#x}>"

    def __del__(self):
        if getattr(self, "_owned", False) and self.cuda_stream:
            try:
                _C._cuda_stream("destroy", self.device_index, self.cuda_stream)
            except Exception:  # interpreter shutdown
                pass


def current_stream(device=None):
    index = _index(device)
    return Stream(index, _handle=_C._cuda_stream("current", index, None))


def default_stream(device=None):
    return Stream(_index(device), _handle=0)


class StreamContext:
    """Makes `stream` current on its device inside the block."""

    def __init__(self, stream):
        self.stream = stream
        self.prev = None

    def __enter__(self):
        if self.stream is not None:
            self.prev = current_stream(self.stream.device_index)
            _C._cuda_stream("set_current", self.stream.device_index, self.stream.cuda_stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            _C._cuda_stream("set_current", self.prev.device_index, self.prev.cuda_stream)
        return False


def stream(stream):
    return StreamContext(stream)


def set_stream(stream):
    """Make `stream` current on its device (outside any `with` block)."""
    if stream is not None:
        _C._cuda_stream("set_current", stream.device_index, stream.cuda_stream)


class Event:
    """A marker in a stream: wait for it, query it, time the work between two."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = enable_timing
        self._device = None
        self._handle = None

    def _ensure(self, device_index):
        if self._handle is None:
            self._device = device_index
            self._handle = _C._cuda_event_new(device_index, self.enable_timing)

    def record(self, stream=None):
        stream = current_stream() if stream is None else stream
        self._ensure(stream.device_index)
        _C._cuda_event("record", self._device, self._handle, stream.cuda_stream)

    def wait(self, stream=None):
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self):
        return True if self._handle is None else _C._cuda_event("query", self._device, self._handle)

    def synchronize(self):
        if self._handle is not None:
            _C._cuda_event("synchronize", self._device, self._handle)

    def elapsed_time(self, end_event):
        """Milliseconds between this event's record and end_event's."""
        if self._handle is None or end_event._handle is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return _C._cuda_event("elapsed", self._device, self._handle, end_event._handle)

    def __del__(self):
        if getattr(self, "_handle", None):
            try:
                _C._cuda_event("destroy", self._device, self._handle)
            except Exception:
                pass


class _Amp:
    """ember.cuda.amp: the older spelling of ember.amp with device 'cuda'."""

    @staticmethod
    def autocast(enabled=True, dtype=None, cache_enabled=True):
        from ..amp import autocast
        return autocast("cuda", dtype=dtype, enabled=enabled)

    @staticmethod
    def GradScaler(init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                   enabled=True):
        from ..amp import GradScaler
        return GradScaler("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


amp = _Amp()


# CUDA graphs (none are made: ember does not capture streams) and the legacy typed tensors
from .graphs import (CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing,  # noqa: E402,F401
                     make_graphed_callables)
from .._tensor_types import CUDA_TYPES as _CUDA_TYPES  # noqa: E402
globals().update(_CUDA_TYPES)
