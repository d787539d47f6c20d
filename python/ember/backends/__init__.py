"""ember.backends: the switches scripts set (torch.backends'). Settable and
readable; cuda.matmul.allow_tf32 lets float32 GPU matmuls use TF32 (Note
[GPU gemm]); the cuDNN ones have nothing to act on (ember has no cuDNN)."""
import types

from .. import _C


class _CudaMatmul:
    """torch.backends.cuda.matmul: allow_tf32 is the core's flag."""
    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self):
        return _C._get_allow_tf32()

    @allow_tf32.setter
    def allow_tf32(self, value):
        _C._set_allow_tf32(bool(value))


def _cuda_is_built():
    try:
        import ember._cuda  # noqa: F401
    except ImportError:
        return False
    return True


cuda = types.SimpleNamespace(matmul=_CudaMatmul(),
                             is_built=_cuda_is_built,
                             flash_sdp_enabled=lambda: False,
                             enable_flash_sdp=lambda enabled: None,
                             enable_mem_efficient_sdp=lambda enabled: None,
                             enable_math_sdp=lambda enabled: None)
cudnn = types.SimpleNamespace(enabled=True, benchmark=False, deterministic=False, allow_tf32=True,
                              is_available=lambda: False, version=lambda: None)
mps = types.SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
openmp = types.SimpleNamespace(is_available=lambda: True)
mkldnn = types.SimpleNamespace(is_available=lambda: False, enabled=False)
