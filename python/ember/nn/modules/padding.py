"""Padding layers (torch.nn's): constant / zero, reflection, replication and
circular padding of the last 1, 2 or 3 dims, each a thin wrapper of F.pad.
`padding` is an int (the same on every side) or a tuple (left, right, top,
bottom, front, back) as F.pad takes it."""
from .. import functional as F
from .module import Module

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d"]


def _sides(padding, n):
    """An int for all 2 * n sides, or the tuple as given."""
    return tuple(padding) if isinstance(padding, (tuple, list)) else (padding,) * (2 * n)


class _ConstantPadNd(Module):
    def __init__(self, value):
        super().__init__()
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    def __init__(self, padding, value):
        super().__init__(value)
        self.padding = _sides(padding, 1)


class ConstantPad2d(_ConstantPadNd):
    def __init__(self, padding, value):
        super().__init__(value)
        self.padding = _sides(padding, 2)


class ConstantPad3d(_ConstantPadNd):
    def __init__(self, padding, value):
        super().__init__(value)
        self.padding = _sides(padding, 3)


class ZeroPad1d(ConstantPad1d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class _ModePadNd(Module):
    _mode = ""
    _n = 1

    def __init__(self, padding):
        super().__init__()
        self.padding = _sides(padding, self._n)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class ReflectionPad1d(_ModePadNd):
    _mode, _n = "reflect", 1


class ReflectionPad2d(_ModePadNd):
    _mode, _n = "reflect", 2


class ReflectionPad3d(_ModePadNd):
    _mode, _n = "reflect", 3


class ReplicationPad1d(_ModePadNd):
    _mode, _n = "replicate", 1


class ReplicationPad2d(_ModePadNd):
    _mode, _n = "replicate", 2


class ReplicationPad3d(_ModePadNd):
    _mode, _n = "replicate", 3


class _CircularPadNd(_ModePadNd):
    _mode = "circular"

    def forward(self, input):
        if input.dim() not in (self._n + 1, self._n + 2):
            raise ValueError(f"expected {self._n + 1}D or {self._n + 2}D input (got {input.dim()}D input)")
        return F.pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    _n = 1


class CircularPad2d(_CircularPadNd):
    _n = 2


class CircularPad3d(_CircularPadNd):
    _n = 3
