"""ember.nn.functional (torch.nn.functional)."""
from .. import _C

one_hot = _C._one_hot  # one_hot(input, num_classes=-1): int64 one-hot rows, in C

__all__ = ["one_hot"]
