"""Identity, Linear, Bilinear (torch.nn's), initialized as torch initializes them."""
import math

from ... import _C
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Identity", "Linear", "Bilinear", "NonDynamicallyQuantizableLinear"]


def reset_fan_in_uniform(weight, bias, empty_bias_zero=True):
    """torch's Linear/Conv init: kaiming_uniform_ with a = sqrt(5), i.e.
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the bias from the same range. With
    no inputs (fan_in 0) Linear zeroes its bias, Conv leaves it as it is."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        if fan_in > 0 or empty_bias_zero:
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(bias, -bound, bound)


class Identity(Module):
    """Returns its input; accepts (and ignores) any constructor arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x W^T + b, W of shape (out_features, in_features)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(_C.empty((out_features, in_features), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(_C.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        reset_fan_in_uniform(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """y = x1^T A x2 + b, A of shape (out_features, in1_features, in2_features)."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(_C.empty((out_features, in1_features, in2_features), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(_C.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class NonDynamicallyQuantizableLinear(Linear):
    """MultiheadAttention's output projection: a Linear under torch's name for it."""


# ---------------------------------------------------------------------------
# LazyLinear: in_features taken from the first input
from .lazy import LazyModuleMixin, _infer_parameters as _lazy_infer  # noqa: E402

__all__ += ["LazyLinear"]


class LazyLinear(LazyModuleMixin, Linear):
    """A Linear whose in_features is input.shape[-1] at the first forward;
    it then becomes a Linear, initialized as Linear initializes."""
    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        from ..parameter import UninitializedParameter
        Module.__init__(self)
        self._initialize_hook = self.register_forward_pre_hook(_lazy_infer, with_kwargs=True)
        self.in_features = 0
        self.out_features = out_features
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        else:
            self.register_parameter("bias", None)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            from ...autograd.grad_mode import no_grad
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()

