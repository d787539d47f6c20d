"""torch.backends.cpu: what the CPU gives ember's kernels."""
from .. import _C

__all__ = ["get_cpu_capability"]


def get_cpu_capability():
    """"AVX512", "AVX2" or "DEFAULT": the vector instructions ember's kernels
    use on this CPU (detected when they run, as torch's are)."""
    return _C._build_info()["cpu_capability"]
