"""ember.amp: mixed precision — autocast (op-boundary casts, Note [autocast])
and GradScaler (loss scaling for float16 gradients)."""
from .autocast_mode import (autocast, is_autocast_enabled, is_autocast_cpu_enabled,  # noqa: F401
                            get_autocast_dtype, get_autocast_gpu_dtype, get_autocast_cpu_dtype)
from .grad_scaler import GradScaler  # noqa: F401
