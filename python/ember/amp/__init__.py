"""ember.amp: mixed precision. Until the CUDA backend lands, autocast is a
working no-op (it enters, exits and decorates, casting nothing) and
GradScaler runs disabled, as torch's do on a machine without CUDA."""
from .autocast_mode import autocast, is_autocast_enabled, get_autocast_dtype  # noqa: F401
from .grad_scaler import GradScaler  # noqa: F401
