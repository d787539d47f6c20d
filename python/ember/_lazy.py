"""NumPy on first use: `import ember` stays fast (NumPy's own import takes
longer than the rest of ember's), and modules that need NumPy for repr,
checkpoints, data loading or init write `from ._lazy import numpy as np`."""
import importlib


class _LazyModule:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):  # only for names not looked up before
        value = getattr(importlib.import_module(self._name), attr)
        setattr(self, attr, value)  # later lookups are plain attribute reads
        return value

    def __repr__(self):
        return f"<lazy module {self._name!r}>"


numpy = _LazyModule("numpy")
