"""torch.backends.cudnn: the cuDNN switches scripts set. ember has no cuDNN,
so the flags are recorded and read back but act on nothing, is_available()
is False and version() None."""
import contextlib

__all__ = ["is_available", "version", "is_acceptable", "flags", "enabled", "benchmark", "deterministic",
           "allow_tf32", "benchmark_limit"]

enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available():
    """False: ember is not built with cuDNN."""
    return False


def version():
    """None: no cuDNN library is loaded."""
    return None


def is_acceptable(tensor):
    """Whether cuDNN would take this tensor: never, without cuDNN."""
    return False


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
    """Set the flags for the duration of the block, then restore them."""
    g = globals()
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    saved = {n: g[n] for n in names}
    g.update(enabled=enabled, benchmark=benchmark, benchmark_limit=benchmark_limit, deterministic=deterministic,
             allow_tf32=allow_tf32)
    try:
        yield
    finally:
        g.update(saved)
