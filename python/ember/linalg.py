"""ember.linalg: torch.linalg's functions."""
from ._C import matmul  # noqa: F401
