"""Conv1d and Conv2d (torch.nn's): weights (out, in / groups, *kernel),
initialized as torch initializes them; padding_mode pads explicitly first."""

from ... import _C
from .. import functional as F
from ..parameter import Parameter
from .linear import reset_fan_in_uniform
from .module import Module

__all__ = ["Conv1d", "Conv2d"]


def _tuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _ConvNd(Module):
    _n = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        n = self._n
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be one of ['zeros', 'reflect', 'replicate', 'circular'], "
                             f"but got padding_mode='{padding_mode}'")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in _tuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = _tuple(kernel_size, n), _tuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n)
        self.dilation, self.groups = _tuple(dilation, n), groups
        self.output_padding, self.transposed = (0,) * n, False
        self.padding_mode = padding_mode
        self.weight = Parameter(_C.empty((out_channels, in_channels // groups) + self.kernel_size,
                                         device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(_C.empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        reset_fan_in_uniform(self.weight, self.bias, empty_bias_zero=False)

    def extra_repr(self):
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.kernel_size):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)

    def _conv(self, fn, input):
        if self.padding_mode != "zeros" and not isinstance(self.padding, str):
            pads = [p for p in reversed(self.padding) for _ in range(2)]
            return fn(F.pad(input, pads, mode=self.padding_mode), self.weight, self.bias, self.stride, 0,
                      self.dilation, self.groups)
        return fn(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class Conv1d(_ConvNd):
    _n = 1

    def forward(self, input):
        return self._conv(F.conv1d, input)


class Conv2d(_ConvNd):
    _n = 2

    def forward(self, input):
        return self._conv(F.conv2d, input)
