"""torch.version's answers for ember: `__version__` (see torch_version.py),
`cuda` the CUDA runtime ember._cuda was built with (None in a build without
the GPU backend), `hip` None (no ROCm build exists), `git_version`, `debug`."""
from .torch_version import __version__, TORCH_API_VERSION, EMBER_VERSION  # noqa: F401

hip = None
debug = False
git_version = "unknown"


def _cuda_version():
    try:
        from . import _cuda
    except ImportError:  # built without nvcc, or the extension cannot load here
        return None
    v = getattr(_cuda, "cuda_runtime_version", None)
    return None if v is None else f"{v // 1000}.{(v % 1000) // 10}"


def __getattr__(name):
    if name == "cuda":  # computed once, on first read: it may load ember._cuda
        globals()["cuda"] = value = _cuda_version()
        return value
    raise AttributeError(f"module 'ember.version' has no attribute '{name}'")
