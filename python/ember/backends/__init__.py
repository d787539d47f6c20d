"""ember.backends: the switches scripts set (torch.backends'). Settable and
readable; only the CUDA backend will act on the TF32 ones."""
import types

cuda = types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False,
                                                         allow_fp16_reduced_precision_reduction=True,
                                                         allow_bf16_reduced_precision_reduction=True),
                             is_built=lambda: False,
                             flash_sdp_enabled=lambda: False,
                             enable_flash_sdp=lambda enabled: None,
                             enable_mem_efficient_sdp=lambda enabled: None,
                             enable_math_sdp=lambda enabled: None)
cudnn = types.SimpleNamespace(enabled=True, benchmark=False, deterministic=False, allow_tf32=True,
                              is_available=lambda: False, version=lambda: None)
mps = types.SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
openmp = types.SimpleNamespace(is_available=lambda: True)
mkldnn = types.SimpleNamespace(is_available=lambda: False, enabled=False)
