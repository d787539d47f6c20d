"""ember.utils: helpers shared by the Python layer."""
import importlib as _importlib

from . import hooks  # noqa: F401


def __getattr__(name):
    # ember.utils.data works after `import ember`, as in torch, but is loaded
    # on first use: its collate table names NumPy types, and importing NumPy
    # would double the time `import ember` takes
    if name in ("data", "checkpoint"):
        return _importlib.import_module("." + name, __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
