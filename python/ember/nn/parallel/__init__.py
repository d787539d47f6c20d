"""torch.nn.parallel: DistributedDataParallel over ember.distributed."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
