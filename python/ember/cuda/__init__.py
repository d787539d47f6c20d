"""ember.cuda: this build has no CUDA backend, so no GPU is ever available."""


def is_available():
    return False


def device_count():
    return 0


def is_bf16_supported():
    return False


def _no_cuda(*args, **kwargs):
    raise RuntimeError("ember was built without CUDA support (the CUDA backend is not built yet)")


current_device = synchronize = set_device = get_device_name = get_device_properties = _no_cuda


def manual_seed(seed):
    """Seeding the GPU generators is a no-op without a GPU (torch does the same)."""


manual_seed_all = manual_seed


def empty_cache():
    """Nothing is cached without a GPU."""


def memory_allocated(device=None):
    return 0


max_memory_allocated = memory_reserved = max_memory_reserved = memory_allocated


def reset_peak_memory_stats(device=None):
    """No GPU memory to track."""


def is_initialized():
    return False


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
