"""Conv1d/2d/3d and ConvTranspose1d/2d/3d (torch.nn's): weights (out, in /
groups, *kernel) — (in, out / groups, *kernel) when transposed — initialized
as torch initializes them; padding_mode pads explicitly first."""

from ... import _C
from .. import functional as F
from ..parameter import Parameter
from .linear import reset_fan_in_uniform
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


def _tuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _ConvNd(Module):
    _n = 0
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None, output_padding=0):
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
        self.output_padding, self.transposed = _tuple(output_padding, n), self._transposed
        self.padding_mode = padding_mode
        shape = (in_channels, out_channels // groups) if self.transposed else (out_channels, in_channels // groups)
        self.weight = Parameter(_C.empty(shape + self.kernel_size, device=device, dtype=dtype))
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
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)

    def _conv(self, fn, input, weight=None, bias=None):
        weight, bias = (self.weight, self.bias) if weight is None else (weight, bias)
        if self.padding_mode != "zeros" and not isinstance(self.padding, str):
            pads = [p for p in reversed(self.padding) for _ in range(2)]
            return fn(F.pad(input, pads, mode=self.padding_mode), weight, bias, self.stride, 0,
                      self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def _conv_forward(self, input, weight, bias):
        """The convolution with another weight and bias (torch's hook for subclasses that transform the weight)."""
        return self._conv(getattr(F, f"conv{self._n}d"), input, weight, bias)


class Conv1d(_ConvNd):
    _n = 1

    def forward(self, input):
        return self._conv(F.conv1d, input)


class Conv2d(_ConvNd):
    _n = 2

    def forward(self, input):
        return self._conv(F.conv2d, input)


class Conv3d(_ConvNd):
    _n = 3

    def forward(self, input):
        return self._conv(F.conv3d, input)


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, output_padding)

    def _output_padding(self, input, output_size):
        """output_padding, or the one that makes the output output_size (torch's range check)."""
        if output_size is None:
            return self.output_padding
        n = self._n
        lead = 2 if input.dim() == n + 2 else 1
        output_size = [int(v) for v in output_size]
        if len(output_size) == n + lead:
            output_size = output_size[lead:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.dim()}D input, output_size must have {n} or "
                             f"{n + lead} elements (got {len(output_size)})")
        lo = [(input.size(d + lead) - 1) * self.stride[d] - 2 * self.padding[d] +
              self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n)]
        hi = [m + s - 1 for m, s in zip(lo, self.stride)]
        for want, a, b in zip(output_size, lo, hi):
            if not a <= want <= b:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes range from {lo} to "
                                 f"{hi} (for an input of {input.size()[lead:]})")
        return tuple(want - a for want, a in zip(output_size, lo))

    def forward(self, input, output_size=None):
        op = self._output_padding(input, output_size)
        return self._fn(input, self.weight, self.bias, self.stride, self.padding, op, self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    _n = 1
    _fn = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    _n = 2
    _fn = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    _n = 3
    _fn = staticmethod(F.conv_transpose3d)
