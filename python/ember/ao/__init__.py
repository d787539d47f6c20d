"""torch.ao: of the quantization stack, the eager-mode float markers
(ao.quantization.QuantStub / DeQuantStub); ember has no quantized kernels."""
from . import quantization  # noqa: F401
