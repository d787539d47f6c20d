"""ember.nn: neural-network layers and functions (torch.nn)."""
from . import functional  # noqa: F401
