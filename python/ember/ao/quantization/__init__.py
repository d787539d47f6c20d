"""torch.ao.quantization for ember: QuantStub, DeQuantStub and QuantWrapper
as they behave in a float model before conversion (identity; QuantWrapper
wraps a module between the two). ember has no quantized tensors, observers or
convert step: prepare/convert/quantize raise NotImplementedError."""
from ...nn.modules.module import Module

__all__ = ["QuantStub", "DeQuantStub", "QuantWrapper", "prepare", "convert", "quantize", "quantize_dynamic",
           "prepare_qat"]

_NO_QUANT = "ember has no quantized tensors or kernels"


class QuantStub(Module):
    """Marks where a float tensor will be quantized; before convert, the identity."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class DeQuantStub(Module):
    """Marks where a quantized tensor will be dequantized; before convert, the identity."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class QuantWrapper(Module):
    """module wrapped as quant -> module -> dequant."""

    def __init__(self, module):
        super().__init__()
        qconfig = getattr(module, "qconfig", None)
        self.add_module("quant", QuantStub(qconfig))
        self.add_module("dequant", DeQuantStub(qconfig))
        self.add_module("module", module)
        self.train(module.training)

    def forward(self, X):
        return self.dequant(self.module(self.quant(X)))


def _absent(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"torch.ao.quantization.{name}: {_NO_QUANT}")
    fn.__name__ = name
    return fn


prepare = _absent("prepare")
prepare_qat = _absent("prepare_qat")
convert = _absent("convert")
quantize = _absent("quantize")
quantize_dynamic = _absent("quantize_dynamic")
