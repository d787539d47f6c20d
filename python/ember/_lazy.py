"""NumPy on first use: `import ember` stays fast (NumPy's own import takes
longer than the rest of ember's), and modules that need NumPy for repr,
checkpoints, data loading or init write `from ._lazy import numpy as np`."""
import importlib


class _LazyModule:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        module = importlib.import_module(self._name)
        return getattr(module, attr)

    def __repr__(self):
        return f"<lazy module {self._name!r}>"


numpy = _LazyModule("numpy")
