"""torch._dynamo.utils: the one question libraries ask at run time,
is_compile_supported(device_type). ember.compile accepts CPU and CUDA code
and runs it eagerly, so code written to be compiled (torchvision's pure-Python
roi_align, used when its compiled op is absent) runs for those devices."""
from .. import _C

__all__ = ["is_compile_supported"]


def is_compile_supported(device_type):
    """Whether ember.compile takes code on this device type (cpu, cuda)."""
    return _C.device(device_type).type in ("cpu", "cuda")
