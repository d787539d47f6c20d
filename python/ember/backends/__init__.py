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


def _sdp_switches():
    """torch.backends.cuda's SDPA switches: the ones ember.nn.attention keeps."""
    import contextlib

    from ..nn.attention import SDPBackend as B, _allowed, _set, sdpa_kernel

    @contextlib.contextmanager
    def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True):
        chosen = [b for b, on in ((B.FLASH_ATTENTION, enable_flash), (B.MATH, enable_math),
                                  (B.EFFICIENT_ATTENTION, enable_mem_efficient),
                                  (B.CUDNN_ATTENTION, enable_cudnn)) if on]
        with sdpa_kernel(chosen):
            yield {}

    return dict(flash_sdp_enabled=lambda: _allowed(B.FLASH_ATTENTION),
                enable_flash_sdp=lambda enabled: _set(B.FLASH_ATTENTION, enabled),
                mem_efficient_sdp_enabled=lambda: _allowed(B.EFFICIENT_ATTENTION),
                enable_mem_efficient_sdp=lambda enabled: _set(B.EFFICIENT_ATTENTION, enabled),
                math_sdp_enabled=lambda: _allowed(B.MATH),
                enable_math_sdp=lambda enabled: _set(B.MATH, enabled),
                cudnn_sdp_enabled=lambda: _allowed(B.CUDNN_ATTENTION),
                enable_cudnn_sdp=lambda enabled: _set(B.CUDNN_ATTENTION, enabled),
                sdp_kernel=sdp_kernel)


cuda = types.SimpleNamespace(matmul=_CudaMatmul(), is_built=_cuda_is_built, **_sdp_switches())
from . import cudnn, cpu  # noqa: E402,F401  (modules: `import torch.backends.cudnn` works)
mps = types.SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
openmp = types.SimpleNamespace(is_available=lambda: True)
mkldnn = types.SimpleNamespace(is_available=lambda: False, enabled=False)
